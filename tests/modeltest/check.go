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
	// Attempts is the run's attempt count, Epoch its retry epoch.
	Attempts, Epoch int
	// Invocations counts step function invocations by
	// "<program key>/<step id>", over the run and all its child runs.
	Invocations map[string]int
	// Completed counts, per "<run id>/<step id>", the COMPLETED attempts
	// recorded, over the run and all its child runs.
	Completed map[string]int
	// ChildRuns counts the child runs per child program key.
	ChildRuns map[string]int
	// Runs are the ends of the run and its descendants, by instance
	// (RunInstance; the run itself under the program's key).
	Runs map[string]RunEnd
	// Executions is the highest ctx.Attempt() an execution of each run saw,
	// by instance.
	Executions map[string]int
	// Continued is how many times the program's run continued as new
	// (Program.Continue): Status, Error, Output, Attempts and Epoch are
	// then the chain's last run's.
	Continued int
	// Broken says how a run of the chain but the last did not end as a
	// continued run must (COMPLETED, naming the next run); empty if none.
	Broken string
	// State is the durable state of the chain's first run as a client
	// reads it after the run ended (KindState names only; nil: not read).
	State map[string]int
	// Updates are the answers the driver's update calls got (KindUpdate),
	// by op ID of the chain's first run.
	Updates map[string]Obs
	// Unreceived counts the events each run of the chain ended without
	// receiving (store.Event.Unreceived), by its program's key (0 too).
	Unreceived map[string]int
}

// Check predicts how p ends and lists how obs differs (nothing: no
// divergence). With crashes (workers were killed, services restarted), the
// runs whose attempts crashes spent end as the database says (CrashFacts),
// a step may have been invoked more often than the model says and a run
// may have made more attempts in the same retry epochs; and a run that
// faults delayed past its deadline ends by it, what it did before being
// bounded, not counted, and a request-cancel child detached below it may
// have been closed before it started. Nothing else may differ.
func Check(p Program, obs Observed, crashes bool) (Prediction, []Diff) {
	var facts CrashFacts
	if crashes {
		facts = CrashFacts(obs.Runs)
	}
	pred := PredictWith(p, facts)
	return pred, Compare(p, pred, obs, crashes)
}

// Compare lists how obs differs from pred (nothing: no divergence); see
// Check.
func Compare(p Program, pred Prediction, obs Observed, crashes bool) []Diff {
	var d []Diff
	add := func(format string, args ...any) { d = append(d, Diff{Msg: fmt.Sprintf(format, args...)}) }
	if obs.Status != pred.Status {
		add("status %s, model %s", obs.Status, pred.Status)
	}
	if obs.Continued != pred.Continued {
		add("continued as new %d time(s), model %d", obs.Continued, pred.Continued)
	}
	if obs.Broken != "" {
		add("chain: %s", obs.Broken)
	}
	if pred.Status != StatusCompleted && obs.Status == pred.Status {
		if got := NormalizeMessage(obs.Error); got != pred.Error {
			add("error %q, model %q", got, pred.Error)
		}
	}
	if pred.Status == StatusCompleted && obs.Status == StatusCompleted {
		d = append(d, compareOutput(pred, obs.Output)...)
	}
	if len(pred.Lost) == 0 && !pred.Deadline && !pred.PastDeadline && !crashes {
		ids := map[string]bool{}
		for id := range pred.Updates {
			ids[id] = true
		}
		for id := range obs.Updates {
			ids[id] = true
		}
		for _, id := range sortedKeys(ids) {
			want, wok := pred.Updates[id]
			got, gok := obs.Updates[id]
			switch {
			case !wok:
				add("update %s answered %s, model sent none", id, obsString(got))
			case !gok:
				add("update %s: no answer, model %s", id, obsString(want))
			case !obsEqual(got, want):
				add("update %s answered %s, model %s", id, obsString(got), obsString(want))
			}
		}
	}
	// The events the chain's runs were sent and ended without: the
	// model's leftovers. Not for a run cut short (a crash, its deadline)
	// or with FailFast branches that raced (whether a losing branch got
	// to send depends on timing).
	if len(pred.Lost) == 0 && !pred.Deadline && !pred.PastDeadline && len(pred.Unchecked) == 0 && obs.Status == pred.Status {
		keys := map[string]bool{}
		for k := range obs.Unreceived {
			keys[k] = true
		}
		for _, key := range sortedKeys(keys) {
			if got, want := obs.Unreceived[key], pred.Unreceived[key]; got != want {
				add("run %s ended with %d event(s) unreceived, model %d", key, got, want)
			}
		}
	}
	// A run lost to a crash or cut short by its deadline set what it got
	// to: its state is not predicted.
	if pred.State != nil && obs.State != nil && len(pred.Lost) == 0 && !pred.Deadline && !pred.PastDeadline {
		if got, want := fmt.Sprint(obs.State), fmt.Sprint(pred.State); got != want {
			add("state %s, model %s", got, want)
		}
	}
	unchecked := map[string]bool{}
	for _, id := range pred.Unchecked {
		unchecked[id] = true
	}
	stepOf := func(k string) string { return k[strings.LastIndexByte(k, '/')+1:] }
	// A crash may have ended a run early: its steps and children, and
	// those of its descendants, are bounded from below only.
	lostUnder := func(k string) bool {
		for _, l := range pred.Lost {
			if k == l || strings.HasPrefix(k, l+".") || strings.HasPrefix(k, l+"/") {
				return true
			}
		}
		return false
	}
	// A run the model says ends by its deadline may be cut short earlier
	// on a slow machine or when recoveries delay it: its ops before the
	// deadline's sleep are bounded, not counted exactly.
	keys := map[string]bool{}
	for k := range pred.Invocations {
		keys[k] = true
	}
	for k := range obs.Invocations {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if unchecked[stepOf(k)] && inChain(p, k) {
			continue
		}
		want, got := pred.Invocations[k], obs.Invocations[k]
		switch {
		case got == want:
		case pred.Deadline && crashes:
		case pred.Deadline && got < want:
		case pred.AtMost[k] && (crashes || got < want):
		case (crashes || lostUnder(k)) && got > want:
		default:
			add("step %s invoked %d times, model %d", k, got, want)
		}
	}
	for k, n := range obs.Completed {
		if n > 1 {
			add("step %s has %d completed attempts", k, n)
		}
	}
	if !pred.Deadline {
		if obs.Epoch != pred.Attempts {
			add("%d run attempts (retry epochs), model %d", obs.Epoch, pred.Attempts)
		}
		if obs.Attempts != obs.Epoch && !crashes {
			add("%d run attempts counted in %d retry epochs", obs.Attempts, obs.Epoch)
		}
	}
	for _, inst := range sortedInts(obs.Executions) {
		if e, ok := obs.Runs[inst]; ok && obs.Executions[inst] > e.Epoch {
			add("run %s executed as attempt %d, in %d retry epochs", inst, obs.Executions[inst], e.Epoch)
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
		if got != want && !pred.Deadline && !(lostUnder(k) && got > want) {
			add("child %s: %d child runs, model %d", k, got, want)
		}
	}
	for _, inst := range sortedEnds(pred.Ends) {
		alts := pred.Ends[inst]
		got, ok := obs.Runs[inst]
		if !ok {
			// A run cut short by its deadline may not have started it.
			if !pred.Deadline {
				add("detached child %s: no run, model %s", inst, endsString(alts))
			}
			continue
		}
		if !endMatches(alts, got) {
			add("detached child %s: %s, model %s", inst, DescribeEnd(got), endsString(alts))
		}
	}
	return d
}

// inChain reports whether the invocation key k ("<program key>/<step
// id>") is of a program of p's chain (Program.Continue), not of a child.
func inChain(p Program, k string) bool {
	for _, q := range p.Chain() {
		if strings.HasPrefix(k, q.Key+"/") {
			return true
		}
	}
	return false
}

func sortedInts(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedEnds(m map[string][]End) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// endMatches reports whether got is one of alts.
func endMatches(alts []End, got RunEnd) bool {
	for _, e := range alts {
		if e.Status != got.Status {
			continue
		}
		if e.Status != StatusCompleted {
			if NormalizeMessage(got.Error) == e.Error {
				return true
			}
			continue
		}
		if len(compareOutput(Prediction{Output: e.Output}, got.Output)) == 0 {
			return true
		}
	}
	return false
}

func endsString(alts []End) string {
	var s []string
	for _, e := range alts {
		s = append(s, e.String())
	}
	return strings.Join(s, " or ")
}

// DescribeEnd summarises a run's end.
func DescribeEnd(e RunEnd) string {
	if e.Status == StatusCompleted {
		return "COMPLETED " + string(e.Output)
	}
	return fmt.Sprintf("%s %q", e.Status, NormalizeMessage(e.Error))
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
			d = append(d, Diff{Msg: fmt.Sprintf("op %s observed %s, model %s", id, obsString(g), obsString(w))})
		}
	}
	return d
}

// Diff is one difference between the engine's outcome and the model's.
type Diff struct {
	Msg string
}

func (d Diff) String() string { return d.Msg }

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
	// Model and Engine describe both outcomes of Minimal.
	Model, Engine string
}

// Describe prints d for a report.
func (d Divergence) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "divergence: seed %d program %d (%s)\n", d.Seed, d.Index, d.Program.Key)
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
	if p.Status != StatusCompleted {
		return fmt.Sprintf("%s %q after %d attempts", p.Status, p.Error, p.Attempts)
	}
	out, _ := json.Marshal(p.Output)
	return fmt.Sprintf("COMPLETED %s after %d attempts", out, p.Attempts)
}

// DescribeObserved summarises an engine outcome.
func DescribeObserved(o Observed) string {
	what := fmt.Sprintf("%s %q", o.Status, NormalizeMessage(o.Error))
	if o.Status == StatusCompleted {
		what = "COMPLETED " + string(o.Output)
	}
	return fmt.Sprintf("%s after %d attempts (%d retry epochs)", what, o.Attempts, o.Epoch)
}

// Verdict is how one program's run compares with the model.
type Verdict struct {
	Diffs  []Diff
	Model  string
	Engine string
	// Lost, Capped and PastDeadline say how the prediction used what
	// crashes decided (Prediction).
	Lost, Capped int
	PastDeadline bool
}

// Diverges reports whether the program differs from the model at all.
func (v Verdict) Diverges() bool { return len(v.Diffs) > 0 }

// Judge compares each program's outcome with the model.
func Judge(ps []Program, obs []Observed, crashes bool) []Verdict {
	out := make([]Verdict, len(ps))
	for i, p := range ps {
		pred, diffs := Check(p, obs[i], crashes)
		out[i] = Verdict{Diffs: diffs, Model: DescribePrediction(pred), Engine: DescribeObserved(obs[i]),
			Lost: len(pred.Lost), Capped: pred.Capped, PastDeadline: pred.PastDeadline}
	}
	return out
}
