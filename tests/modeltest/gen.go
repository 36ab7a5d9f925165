package modeltest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// DefaultSeed is the seed of `make test`'s programs.
const DefaultSeed = 1

// LongSleepMS is the sleep of a program that must miss its deadline.
const LongSleepMS = 10 * 60 * 1000

// DeadlineMS is the deadline of a program that sleeps past it: long enough
// for the ops before its long sleep on a loaded machine. Fault-free, the
// model counts those ops exactly, so a deadline that a slow machine lets
// come first is a divergence: the largest such programs (seed 1's #88,
// nested children with retries in two retry epochs) took over 20 s in a
// CI run under -race beside the other packages' tests.
const DeadlineMS = 60_000

// ProgramKey names program i of seed.
func ProgramKey(seed uint64, i int) string { return fmt.Sprintf("p%d-%d", seed, i) }

// Generate returns program i of seed: the same seed and index always give
// the same program.
func Generate(seed uint64, i int) Program {
	g := &gen{rng: rand.New(rand.NewPCG(seed, uint64(i)+0x5eed))}
	p := Program{Key: ProgramKey(seed, i)}
	p.Ops = g.seq(0, 1+g.rng.IntN(6), genFlags{waits: true, children: true, parallel: true, program: true})
	if g.chance(0.5) {
		p.RunRetry = &Retry{MaxAttempts: 2 + g.rng.IntN(2), IntervalMS: 5 + g.rng.IntN(26)}
		if g.chance(0.2) {
			p.RunRetry.NonRetryable = []string{TypeDeclined}
		}
	}
	switch r := g.rng.Float64(); {
	case r < 0.08:
		// Misses its deadline: a long sleep somewhere at the top level.
		p.DeadlineMS = DeadlineMS
		at := g.rng.IntN(len(p.Ops) + 1)
		sleep := Op{Kind: KindSleep, ID: g.id("z"), MS: LongSleepMS}
		p.Ops = append(p.Ops[:at], append([]Op{sleep}, p.Ops[at:]...)...)
	case r < 0.13:
		// A deadline it keeps.
		p.DeadlineMS = 10 * 60 * 1000
	}
	setChildKeys(&p)
	addStateOps(&p, rand.New(rand.NewPCG(seed, uint64(i)+0x57a7e)))
	addUpdateOps(&p, rand.New(rand.NewPCG(seed, uint64(i)+0x0bda7e)))
	// Continues as new, up to twice, if nothing in it cancels, terminates
	// or detaches (a cancelled run does not continue; a detached child's
	// end is its parent's).
	if continuable(p) && g.chance(0.15) {
		n := 1 + g.rng.IntN(2)
		last := &p
		for i := 1; i <= n; i++ {
			q := Program{Key: ContinueKey(p.Key, i), RunRetry: p.RunRetry}
			q.Ops = g.seq(0, 1+g.rng.IntN(4), genFlags{waits: true, children: true, parallel: true})
			setChildKeys(&q)
			last.Continue = &q
			last = &q
		}
	}
	return p
}

// StateNames are the names of the durable state KindState ops set.
var StateNames = []string{"a", "b"}

// addStateOps inserts, in a third of the programs, one to three KindState
// ops at random places of the top-level sequence. They draw from an rng of
// their own, so the rest of each generated program is what it was before
// state ops existed (and the regression cases still mean what they did).
func addStateOps(p *Program, rng *rand.Rand) {
	if rng.Float64() >= 1.0/3 {
		return
	}
	for k, n := 1, 1+rng.IntN(3); k <= n; k++ {
		op := Op{Kind: KindState, ID: "k" + strconv.Itoa(k), OnErr: OnErrHandle,
			Name: StateNames[rng.IntN(len(StateNames))], Outcomes: []Outcome{{Kind: OutOK, Value: rng.IntN(1000)}}}
		at := rng.IntN(len(p.Ops) + 1)
		p.Ops = append(p.Ops[:at], append([]Op{op}, p.Ops[at:]...)...)
	}
}

// addUpdateOps inserts, in a fifth of the programs, one or two KindUpdate
// ops into the top-level sequence before anything that would keep them
// from being answered (a cancellation, a termination, a sleep past the
// deadline), from an rng of their own as addStateOps.
func addUpdateOps(p *Program, rng *rand.Rand) {
	if rng.Float64() >= 0.2 {
		return
	}
	stop := len(p.Ops)
	for i, op := range p.Ops {
		if op.Kind == KindCancel || op.Kind == KindTerminate || (op.Kind == KindSleep && op.MS >= LongSleepMS) {
			stop = i
			break
		}
	}
	for k, n := 1, 1+rng.IntN(2); k <= n; k++ {
		op := Op{Kind: KindUpdate, ID: "u" + strconv.Itoa(k), OnErr: OnErrHandle, Payload: "req" + strconv.Itoa(rng.IntN(1000)),
			Outcomes: []Outcome{{Kind: OutOK, Value: rng.IntN(1000)}}}
		op.Name = "upd-" + op.ID
		if rng.IntN(4) == 0 {
			op.Outcomes[0].Kind = OutDeclined
		}
		at := rng.IntN(stop + 1)
		p.Ops = append(p.Ops[:at], append([]Op{op}, p.Ops[at:]...)...)
		stop++
	}
}

// continuable reports whether p may continue as new: no op of it cancels,
// terminates or detaches.
func continuable(p Program) bool {
	ok := true
	Walk(p.Ops, func(op *Op) {
		switch op.Kind {
		case KindCancel, KindTerminate, KindDetach:
			ok = false
		}
	})
	return ok
}

// setChildKeys names every child program after its parent and its step.
func setChildKeys(p *Program) {
	Walk(p.Ops, func(op *Op) {
		for i := range op.Children {
			c := &op.Children[i]
			c.Program.Key = p.Key + "." + c.ID
			setChildKeys(&c.Program)
		}
	})
}

type gen struct {
	rng *rand.Rand
	n   int
}

type genFlags struct {
	waits, children, parallel bool
	// program: the sequence is a program's own (not a Parallel branch's):
	// it may be cancelled or terminated, and detach children.
	program bool
	// noReturn: every op handles its error.
	noReturn bool
}

func (g *gen) chance(p float64) bool { return g.rng.Float64() < p }

func (g *gen) id(prefix string) string {
	g.n++
	return prefix + strconv.Itoa(g.n)
}

func (g *gen) onErr(f genFlags) string {
	if f.noReturn || g.chance(0.6) {
		return OnErrHandle
	}
	return OnErrReturn
}

// seq generates a sequence of n ops.
func (g *gen) seq(depth, n int, f genFlags) []Op {
	var ops []Op
	// Event names of this sequence whose event may still be unconsumed.
	var names []string
	// cancelled: a cancel op came before; what follows does nothing new
	// (steps, sleeps, waits and children keep it simple to predict).
	cancelled := false
	for len(ops) < n {
		r := g.rng.Float64()
		switch {
		case r < 0.05 && f.program && !cancelled:
			ops = append(ops, g.cancel(f))
			cancelled = true
		case r < 0.08 && f.program:
			// Nothing after a termination runs.
			return append(ops, g.terminate())
		case r < 0.14 && f.program && !cancelled && depth < 2:
			ops = append(ops, g.detach())
		case r < 0.41:
			ops = append(ops, g.step(f))
		case r < 0.43:
			ops = append(ops, Op{Kind: KindSide, ID: g.id("e"), OnErr: g.onErr(f), Outcomes: []Outcome{{Kind: OutOK, Value: g.rng.IntN(1000)}}})
		case r < 0.45 && f.program && depth == 0:
			ops = append(ops, Op{Kind: KindVersion, ID: g.id("v"), OnErr: g.onErr(f)})
		case r < 0.55:
			ops = append(ops, Op{Kind: KindSleep, ID: g.id("z"), MS: 5 + g.rng.IntN(96)})
		case r < 0.72 && f.waits:
			op := g.wait(f, names)
			names = append(names, op.Name)
			ops = append(ops, op)
		case r < 0.84 && f.children && depth < 2:
			ops = append(ops, g.children(depth, f))
		case r >= 0.84 && f.parallel && depth == 0 && !cancelled:
			ops = append(ops, g.parallel(depth, f))
		default:
			ops = append(ops, g.step(f))
		}
	}
	return ops
}

// cancel is a cancel op with a cleanup step, most often.
func (g *gen) cancel(f genFlags) Op {
	op := Op{Kind: KindCancel, ID: g.id("x"), OnErr: g.onErr(f)}
	op.Name = "x" + op.ID[1:]
	if g.chance(0.8) {
		c := g.step(f)
		op.Cleanup = &c
	}
	return op
}

func (g *gen) terminate() Op {
	op := Op{Kind: KindTerminate, ID: g.id("t")}
	op.Name = "t" + op.ID[1:]
	return op
}

// detach starts one to three children under random parent-close policies;
// each holds, then runs a cleanup step and maybe a step or two.
func (g *gen) detach() Op {
	op := Op{Kind: KindDetach, ID: g.id("d")}
	op.Name = "held-" + op.ID
	n := 1 + g.rng.IntN(3)
	policies := []string{PolicyTerminate, PolicyRequestCancel, PolicyAbandon}
	for i := 0; i < n; i++ {
		id := op.ID + "-" + strconv.Itoa(i)
		hold := Op{Kind: KindHold, ID: g.id("h"), OnErr: g.onErr(genFlags{})}
		hold.Name = "h" + hold.ID[1:]
		hold.Payload = "released-" + hold.ID
		if g.chance(0.8) {
			c := g.step(genFlags{})
			hold.Cleanup = &c
		}
		ops := []Op{hold}
		for k := g.rng.IntN(3); k > 0; k-- {
			ops = append(ops, g.step(genFlags{}))
		}
		c := Child{ID: id, Program: Program{Ops: ops}, Policy: policies[g.rng.IntN(len(policies))],
			Retry: &Retry{MaxAttempts: 1 + g.rng.IntN(2), IntervalMS: 5 + g.rng.IntN(16)}}
		op.Children = append(op.Children, c)
	}
	return op
}

func (g *gen) step(f genFlags) Op {
	op := Op{Kind: KindStep, ID: g.id("s"), OnErr: g.onErr(f)}
	n := 1 + g.rng.IntN(4)
	timeout := false
	for i := 0; i < n; i++ {
		var o Outcome
		switch r := g.rng.Float64(); {
		case r < 0.5:
			o = Outcome{Kind: OutOK, Value: g.rng.IntN(1000)}
		case r < 0.7:
			o = Outcome{Kind: OutFail}
		case r < 0.78:
			o = Outcome{Kind: OutDeclined}
		case r < 0.85:
			o = Outcome{Kind: OutFatal}
		case r < 0.93:
			o = Outcome{Kind: OutTimeout}
			timeout = true
		default:
			o = Outcome{Kind: OutPanic}
		}
		op.Outcomes = append(op.Outcomes, o)
	}
	op.Retry = &Retry{MaxAttempts: 1 + g.rng.IntN(4), IntervalMS: 5 + g.rng.IntN(46)}
	if g.chance(0.3) {
		op.Retry.Coefficient = 2
	}
	if g.chance(0.3) {
		op.Retry.NonRetryable = []string{TypeDeclined}
	}
	if timeout || g.chance(0.1) {
		op.TimeoutMS = 5 + g.rng.IntN(16)
	}
	return op
}

func (g *gen) wait(f genFlags, names []string) Op {
	op := Op{Kind: KindWait, ID: g.id("w"), OnErr: g.onErr(f), TimeoutMS: 20 + g.rng.IntN(61)}
	op.Payload = "ev-" + op.ID
	if len(names) > 0 && g.chance(0.4) {
		// Another wait for a name waited for before in this sequence: it
		// takes an event left unconsumed, if any.
		op.Name = names[g.rng.IntN(len(names))]
		if g.chance(0.5) {
			op.Send = SendNever
		} else {
			op.Send = SendAfter
		}
		return op
	}
	op.Name = "e" + op.ID[1:]
	switch r := g.rng.Float64(); {
	case r < 0.3:
		op.Send = SendBefore
	case r < 0.5:
		op.Send = SendDuring
		op.TimeoutMS = 60_000
	case r < 0.75:
		op.Send = SendAfter
	default:
		op.Send = SendNever
	}
	return op
}

func (g *gen) children(depth int, f genFlags) Op {
	op := Op{Kind: KindChildren, ID: g.id("c"), OnErr: g.onErr(f)}
	n := 1 + g.rng.IntN(3)
	for i := 0; i < n; i++ {
		id := op.ID + "-" + strconv.Itoa(i)
		cp := Program{Ops: g.seq(depth+1, 1+g.rng.IntN(3), genFlags{children: true, program: true})}
		c := Child{ID: id, Program: cp, Retry: &Retry{MaxAttempts: 1 + g.rng.IntN(2), IntervalMS: 5 + g.rng.IntN(16)}}
		op.Children = append(op.Children, c)
	}
	return op
}

func (g *gen) parallel(depth int, f genFlags) Op {
	op := Op{Kind: KindParallel, ID: g.id("g"), OnErr: g.onErr(f), Mode: ModeCollectAll}
	n := 2 + g.rng.IntN(2)
	if g.chance(0.35) {
		op.Mode = ModeFailFast
		// One branch may fail; the others only handle their errors, so the
		// first error is that branch's whatever the timing.
		failing := g.rng.IntN(n)
		for b := 0; b < n; b++ {
			bf := genFlags{noReturn: b != failing}
			op.Branches = append(op.Branches, g.seq(depth+1, 1+g.rng.IntN(3), bf))
		}
		return op
	}
	for b := 0; b < n; b++ {
		op.Branches = append(op.Branches, g.seq(depth+1, 1+g.rng.IntN(3), genFlags{waits: true, children: true}))
	}
	return op
}
