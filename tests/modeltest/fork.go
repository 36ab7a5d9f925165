package modeltest

import "math/rand/v2"

// Forkable reports whether the model predicts a fork of p's run (the
// client's Fork: a new run whose history is the run's completed steps
// recorded before a chosen step): p is one run with one attempt, no
// deadline, and only ops whose outcome is its own — steps, sleeps, side
// effects, versions, durable state and collect-all Parallel groups of
// those. Events, children, cancellations, retries of the run and fail-fast
// races depend on what happened to the run, not on its program.
func Forkable(p Program) bool {
	if p.RunRetry != nil || p.Continue != nil || p.DeadlineMS > 0 {
		return false
	}
	ok := true
	Walk(p.Ops, func(op *Op) {
		switch op.Kind {
		case KindStep, KindSleep, KindSide, KindVersion, KindState:
		case KindParallel:
			ok = ok && op.Mode == ModeCollectAll
		default:
			ok = false
		}
	})
	return ok
}

// ForkPoint picks, for the i-th forkable program of a seed, the step a
// fork of its run executes from: a top-level step the run recorded (one
// the model says it reached), or "" (from the start) in one case of five.
// ok is false when p is not Forkable.
func ForkPoint(p Program, seed uint64, i int) (step string, ok bool) {
	if !Forkable(p) {
		return "", false
	}
	_, steps := predict(p, nil, nil)
	var reached []string
	for _, op := range p.Ops {
		if op.Kind == KindStep && steps[op.ID] != nil {
			reached = append(reached, op.ID)
		}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(i)+0xf0c))
	if len(reached) == 0 || rng.IntN(5) == 0 {
		return "", true
	}
	return reached[rng.IntN(len(reached))], true
}

// PredictFork returns how a fork of p's run from the top-level step from
// ("" from the start) ends: the steps the run completed in the ops before
// from are its recorded history and replay (no invocation); from and what
// follows run again as in a new run, attempt numbers from 1. Only a
// Forkable program has one attempt and a history in program order, so
// only its forks are predicted.
func PredictFork(p Program, from string) Prediction {
	_, steps := predict(p, nil, nil)
	seed := map[string]*mstep{}
	if from != "" {
		for i := range p.Ops {
			if p.Ops[i].ID == from {
				Walk(p.Ops[:i], func(op *Op) {
					if s := steps[op.ID]; s != nil && s.done {
						seed[op.ID] = &mstep{done: true, value: s.value}
					}
				})
				break
			}
		}
	}
	pred, _ := predict(p, nil, seed)
	return pred
}
