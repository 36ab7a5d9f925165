package modeltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Observed is how the engine ended a program's run, with what the checker
// needs from the database and the invocation logs.
type Observed struct {
	Status string
	Error  string
	Output json.RawMessage
	// Attempts is the run's attempt count.
	Attempts int
	// Invocations counts step function invocations by
	// "<program key>/<step id>", over the run and all its child runs.
	Invocations map[string]int
	// Completed counts, per "<run id>/<step id>", the COMPLETED attempts
	// recorded, over the run and all its child runs.
	Completed map[string]int
	// ChildRuns counts the child runs per child program key.
	ChildRuns map[string]int
	// PIDs are the processes that executed the program's runs.
	PIDs map[int]bool
}

// Compare lists how obs differs from pred (nothing: no divergence). With
// crashes (workers were killed), a step may have been invoked more often
// than the model says and a run may have been tried more often, but never
// less.
func Compare(p Program, pred Prediction, obs Observed, crashes bool) []Diff {
	var d []Diff
	add := func(format string, args ...any) { d = append(d, Diff{Msg: fmt.Sprintf(format, args...)}) }
	if obs.Status != pred.Status {
		add("status %s, model %s", obs.Status, pred.Status)
	}
	if pred.Status == StatusFailed && obs.Status == StatusFailed {
		if got := NormalizeMessage(obs.Error); got != pred.Error {
			add("error %q, model %q", got, pred.Error)
		}
	}
	if pred.Status == StatusCompleted && obs.Status == StatusCompleted {
		d = append(d, compareOutput(pred, obs.Output)...)
	}
	unchecked := map[string]bool{}
	for _, id := range pred.Unchecked {
		unchecked[id] = true
	}
	stepOf := func(k string) string { return k[strings.LastIndexByte(k, '/')+1:] }
	// A run the model says ends by its deadline may be cut short earlier
	// on a slow machine or when recoveries delay it: its ops before the
	// deadline's sleep are bounded, not counted exactly.
	exactCounts := !crashes && !pred.Deadline
	keys := map[string]bool{}
	for k := range pred.Invocations {
		keys[k] = true
	}
	for k := range obs.Invocations {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if unchecked[stepOf(k)] && strings.HasPrefix(k, p.Key+"/") {
			continue
		}
		want, got := pred.Invocations[k], obs.Invocations[k]
		switch {
		case got == want:
		case pred.Deadline && crashes:
		case pred.Deadline && got < want:
		case exactCounts || got < want:
			add("step %s invoked %d times, model %d", k, got, want)
		}
	}
	for k, n := range obs.Completed {
		if n > 1 {
			add("step %s has %d completed attempts", k, n)
		}
	}
	if !crashes || obs.Attempts < pred.Attempts {
		if obs.Attempts != pred.Attempts && !pred.Deadline {
			add("%d run attempts, model %d", obs.Attempts, pred.Attempts)
		}
	}
	ck := map[string]bool{}
	for k := range pred.Children {
		ck[k] = true
	}
	for k := range obs.ChildRuns {
		ck[k] = true
	}
	for _, k := range sortedKeys(ck) {
		want, got := pred.Children[k], obs.ChildRuns[k]
		if got != want && (!crashes || got < want) && !pred.Deadline {
			add("child %s: %d child runs, model %d", k, got, want)
		}
	}
	return d
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func compareOutput(pred Prediction, out json.RawMessage) []Diff {
	var got Record
	if err := json.Unmarshal(out, &got); err != nil {
		return []Diff{{Msg: fmt.Sprintf("output %s is not a record: %v", out, err)}}
	}
	unchecked := map[string]bool{}
	for _, id := range pred.Unchecked {
		unchecked[id] = true
	}
	ids := map[string]bool{}
	for id := range pred.Output {
		ids[id] = true
	}
	for id := range got {
		ids[id] = true
	}
	var d []Diff
	for _, id := range sortedKeys(ids) {
		if unchecked[id] {
			continue
		}
		w, okw := pred.Output[id]
		g, okg := got[id]
		switch {
		case !okg:
			d = append(d, Diff{Msg: fmt.Sprintf("op %s: no observation, model %s", id, obsString(w))})
		case !okw:
			d = append(d, Diff{Msg: fmt.Sprintf("op %s observed %s, model: not reached", id, obsString(g))})
		case !obsEqual(w, g):
			d = append(d, Diff{Msg: fmt.Sprintf("op %s observed %s, model %s", id, obsString(g), obsString(w)), Known: knownObsDiff(w, g)})
		}
	}
	return d
}

// Diff is one difference between the engine's outcome and the model's.
type Diff struct {
	Msg string
	// Known names the known issue that explains it ("" if none does).
	Known string
}

func (d Diff) String() string {
	if d.Known != "" {
		return d.Msg + " [known: " + d.Known + "]"
	}
	return d.Msg
}

// Known divergences of the engine: the model says what a user of a
// durable engine relies on, the engine does otherwise. Each is reported,
// with its count, but does not fail the test; any other divergence does.
const (
	// IssueNRLost: a step failure that was final is returned again on
	// replay as a *workflow.StepError without its workflow.NonRetryable
	// mark (the delivered step carries no such field), so whether the
	// workflow sees the mark — and whether a run that returns it is retried
	// — depends on whether the run was suspended (or its worker crashed)
	// between the failure and the use of the error.
	IssueNRLost = "nonretryable-mark-lost-on-replay"
	// IssueTimeoutType: a step attempt that timed out fails with
	// context.DeadlineExceeded, which is no workflow.TypedError; replayed,
	// it is a *workflow.StepError, which is. workflow.ErrorType of errors
	// joined with it (Parallel CollectAll, ChildAll) names the first typed
	// error, so it changes between the execution that ran the step and a
	// replay.
	IssueTimeoutType = "timeout-typed-only-on-replay"
	// IssueCrashAttempt: the reaper takes a run back from a worker that
	// died (or whose lease expired) as a new run attempt, with the run's
	// backoff, and fails it once the run's policy's attempts are spent
	// ("worker <id> lost"). A crash thus fails a run that allows one
	// attempt, and the new attempt gives failed steps a fresh budget,
	// waits again for timed-out events and starts failed children again:
	// a crash changes the outcome. Only a run a killed worker touched can
	// diverge this way (kagzi chaos --model).
	IssueCrashAttempt = "crash-recovery-is-a-run-attempt"
)

// KnownIssues lists the known divergences with their quirks.
var KnownIssues = []struct {
	ID     string
	Quirks Quirks
}{
	{IssueNRLost, Quirks{LoseNR: true}},
	{IssueTimeoutType, Quirks{TypedTimeouts: true}},
}

// knownObsDiff names the known issues that explain an op observed g where
// the model says w ("" if none does): the two are equal once the
// non-retryable marks are dropped, or the types of errors that hold a step
// timeout, or both — in the observation and in the records of children it
// holds.
func knownObsDiff(w, g Obs) string {
	for _, c := range []struct {
		nr, timeout bool
		issue       string
	}{
		{true, false, IssueNRLost},
		{false, true, IssueTimeoutType},
		{true, true, IssueNRLost + "," + IssueTimeoutType},
	} {
		if reflect.DeepEqual(canon(w, c.nr, c.timeout), canon(g, c.nr, c.timeout)) {
			return c.issue
		}
	}
	return ""
}

// canon decodes an observation for knownObsDiff, dropping non-retryable
// marks (nr) and the types of errors that hold a step timeout (timeout).
func canon(o Obs, nr, timeout bool) any {
	b, _ := json.Marshal(o)
	var v any
	_ = json.Unmarshal(b, &v)
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if nr {
				delete(x, "nr")
			}
			if e, ok := x["err"].(string); ok && timeout && strings.Contains(e, "context deadline exceeded") {
				delete(x, "type")
			}
			for k, y := range x {
				x[k] = walk(y)
			}
		case []any:
			for i, y := range x {
				x[i] = walk(y)
			}
		}
		return v
	}
	return walk(v)
}

// Explain returns the known issues that explain every difference of p's
// outcome obs from the model's — under the model, or under the quirks of
// every issue at once — or ok false if some difference is new.
func Explain(p Program, obs Observed, crashes bool) (issues []string, ok bool) {
	try := func(d []Diff) ([]string, bool) {
		set := map[string]bool{}
		for _, x := range d {
			if x.Known == "" {
				return nil, false
			}
			for _, k := range strings.Split(x.Known, ",") {
				set[k] = true
			}
		}
		return sortedKeys(set), true
	}
	if is, ok := try(Compare(p, Predict(p), obs, crashes)); ok {
		return is, true
	}
	var all Quirks
	for _, k := range KnownIssues {
		all.LoseNR = all.LoseNR || k.Quirks.LoseNR
		all.TypedTimeouts = all.TypedTimeouts || k.Quirks.TypedTimeouts
	}
	if is, ok := try(Compare(p, PredictWith(p, all), obs, crashes)); ok {
		if len(is) == 0 {
			// Explained by the quirks alone; name them.
			for _, k := range KnownIssues {
				is = append(is, k.ID)
			}
		}
		return is, true
	}
	return nil, false
}

func obsEqual(a, b Obs) bool {
	return a.Err == b.Err && a.Type == b.Type && a.NR == b.NR && JSONEqual(a.V, b.V)
}

// JSONEqual reports whether a and b encode the same JSON value.
func JSONEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func obsString(o Obs) string {
	var parts []string
	if len(o.V) > 0 {
		parts = append(parts, "value "+string(o.V))
	}
	if o.Err != "" || o.Type != "" {
		s := fmt.Sprintf("error %q (%s", o.Err, o.Type)
		if o.NR {
			s += ", non-retryable"
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Divergence is a program whose engine outcome differs from the model's.
type Divergence struct {
	// Seed and Index generated the program (Index -1: a regression case).
	Seed  uint64
	Index int
	// Program is the program run; Minimal the smallest program found that
	// still diverges (Program itself if shrinking did not help).
	Program, Minimal Program
	// Diffs are the differences of Minimal (of Program until shrunk).
	Diffs []Diff
	// Known lists the known issues that explain it (empty: a new one).
	Known []string
	// Model and Engine describe both outcomes of Minimal.
	Model, Engine string
}

// Describe prints d for a report.
func (d Divergence) Describe() string {
	var b strings.Builder
	what := "divergence"
	if len(d.Known) > 0 {
		what = "known divergence (" + strings.Join(d.Known, ", ") + ")"
	}
	fmt.Fprintf(&b, "%s: seed %d program %d (%s)\n", what, d.Seed, d.Index, d.Program.Key)
	fmt.Fprintf(&b, "  minimal program: %s\n", d.Minimal)
	fmt.Fprintf(&b, "  model:  %s\n", d.Model)
	fmt.Fprintf(&b, "  engine: %s\n", d.Engine)
	for _, x := range d.Diffs {
		fmt.Fprintf(&b, "  - %s\n", x.String())
	}
	return b.String()
}

// DescribePrediction summarises a prediction.
func DescribePrediction(p Prediction) string {
	if p.Status == StatusFailed {
		return fmt.Sprintf("FAILED %q after %d attempts", p.Error, p.Attempts)
	}
	out, _ := json.Marshal(p.Output)
	return fmt.Sprintf("COMPLETED %s after %d attempts", out, p.Attempts)
}

// DescribeObserved summarises an engine outcome.
func DescribeObserved(o Observed) string {
	if o.Status == StatusCompleted {
		return fmt.Sprintf("COMPLETED %s after %d attempts", o.Output, o.Attempts)
	}
	return fmt.Sprintf("%s %q after %d attempts", o.Status, NormalizeMessage(o.Error), o.Attempts)
}

// Verdict is how one program's run compares with the model.
type Verdict struct {
	Diffs []Diff
	// Explained: every difference is one of KnownIssues (Known).
	Explained bool
	Known     []string
	Model     string
	Engine    string
}

// Diverges reports whether the program differs from the model at all.
func (v Verdict) Diverges() bool { return len(v.Diffs) > 0 }

// Judge compares each program's outcome with the model.
func Judge(ps []Program, obs []Observed, crashes bool) []Verdict {
	out := make([]Verdict, len(ps))
	for i, p := range ps {
		pred := Predict(p)
		v := Verdict{Diffs: Compare(p, pred, obs[i], crashes), Model: DescribePrediction(pred), Engine: DescribeObserved(obs[i])}
		if len(v.Diffs) > 0 {
			v.Known, v.Explained = Explain(p, obs[i], crashes)
		}
		out[i] = v
	}
	return out
}
