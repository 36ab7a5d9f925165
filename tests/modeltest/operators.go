package modeltest

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
)

// Operator scenarios: what an operator does to many runs at once, and
// what the engine must make of it. A scenario starts a few runs with
// search attributes, each of which waits for the event OperatorEvent
// between two steps, then acts on them in turn: pauses and resumes runs,
// sends them their event, cancels them, lists and counts them by a query,
// and starts batches (cancel, pause, resume, signal) over a query or a
// list of ids. The model predicts every act's answer, each batch's set of
// runs and each run's outcome in it, and how every run ends:
//
//   - a paused run is not claimed: its event is stored and it does not go
//     on until it is resumed, and then ends as it would have (a cancel
//     request made while it was paused included); pausing a paused run
//     changes nothing (AlreadyPaused), resuming a run that is not paused
//     changes nothing (not WasPaused), pausing a finished run is an
//     ErrConflict; a pause consumes no attempt;
//   - a query matches the runs whose attributes and status it names;
//   - a batch's set is the live runs its query matches when it is created
//     (none: ErrNotFound), or its ids, refused with ErrConflict, and
//     nothing created, when one of them is finished; each run of it is
//     done, or skipped when the action does not take it any more (a pause
//     of a paused run, a resume of a run that is not paused).
//
// The driver settles after each act: it waits for the runs the model says
// the act ends before the next one, so the model's order is the engine's.

// Attributes of the runs of operator scenarios, declared by the driver.
const (
	// AttrScenario (keyword) is the scenario's tag: its queries name it,
	// so they match its runs only.
	AttrScenario = "mt_scenario"
	// AttrGroup (keyword) is the run's group.
	AttrGroup = "mt_group"
	// AttrIndex (int) is the run's index in the scenario.
	AttrIndex = "mt_index"
)

// OperatorEvent is the event an operator scenario's run waits for.
const OperatorEvent = "go"

// Acts of an operator scenario.
const (
	ActPause  = "pause"
	ActResume = "resume"
	ActSend   = "send"
	ActCancel = "cancel"
	ActList   = "list"
	ActCount  = "count"
	ActBatch  = "batch"
)

// Batch actions an operator scenario uses (client.BatchAction's values).
const (
	BatchCancel = "cancel"
	BatchPause  = "pause"
	BatchResume = "resume"
	BatchSignal = "signal"
	// BatchTerminate ends each run at once, CANCELLED with
	// TerminatedBatchError, paused or not.
	BatchTerminate = "terminate"
)

// BatchReason is the reason of a scenario's batches (a terminate's is in
// its runs' error, TerminatedBatchError).
const BatchReason = "model batch"

// TerminatedBatchError is the error of a run a terminate batch ended.
const TerminatedBatchError = "terminated: " + BatchReason

// Status filters of a list act (Act.Status).
const (
	FilterAll       = ""
	FilterLive      = "live"
	FilterCompleted = "completed"
	FilterCancelled = "cancelled"
	FilterPaused    = "paused"
)

// LiveStatus is how the model names every live status (PENDING, RUNNING,
// SLEEPING) in counts: which one a live run is in depends on timing.
const LiveStatus = "LIVE"

// Scenario is one operator scenario.
type Scenario struct {
	// Name, unique per seed, keys the scenario's programs.
	Name string `json:"name"`
	Runs []ScenarioRun
	Acts []Act
}

// ScenarioRun is one run of a scenario.
type ScenarioRun struct {
	Program Program
	// Groups are the values of its keyword AttrGroup: one, or a list of
	// two (a query by group matches the run when one of them is the
	// group).
	Groups []string
}

// Attributes are the search attributes run i of scenario s starts with.
func (s Scenario) Attributes(i int) map[string]any {
	var g any = s.Runs[i].Groups
	if len(s.Runs[i].Groups) == 1 {
		g = s.Runs[i].Groups[0]
	}
	return map[string]any{AttrScenario: s.Name, AttrGroup: g, AttrIndex: i}
}

// Act is one act of an operator scenario.
type Act struct {
	Kind string `json:"kind"`
	// Run is the run acted on (pause, resume, send, cancel).
	Run int `json:"run,omitempty"`
	// Payload is the event's (send, a signal batch).
	Payload string `json:"payload,omitempty"`
	// Group, if set, narrows a query (list, count, a batch by query) to
	// the runs of the group, Below to the runs of a lower index (an int
	// attribute's comparison); Status to a status (list).
	Group  string `json:"group,omitempty"`
	Below  int    `json:"below,omitempty"`
	Status string `json:"status,omitempty"`
	// Action is a batch's; IDs, if set, are the runs it lists (else it
	// goes by query, narrowed by Group and, if PausedOnly, to paused
	// runs).
	Action     string `json:"action,omitempty"`
	IDs        []int  `json:"ids,omitempty"`
	PausedOnly bool   `json:"paused_only,omitempty"`
}

func (a Act) String() string {
	switch a.Kind {
	case ActPause, ActResume, ActCancel:
		return fmt.Sprintf("%s r%d", a.Kind, a.Run)
	case ActSend:
		return fmt.Sprintf("send r%d %q", a.Run, a.Payload)
	case ActList:
		return fmt.Sprintf("list group=%q below=%d status=%q", a.Group, a.Below, a.Status)
	case ActCount:
		return fmt.Sprintf("count group=%q below=%d by status", a.Group, a.Below)
	default:
		if a.IDs != nil {
			return fmt.Sprintf("batch %s ids %v", a.Action, a.IDs)
		}
		return fmt.Sprintf("batch %s group=%q below=%d paused_only=%v", a.Action, a.Group, a.Below, a.PausedOnly)
	}
}

// Query is the query of a (list, count, batch by query) act over the
// scenario tagged tag, in the engine's query language.
func (a Act) Query(tag string) string {
	q := fmt.Sprintf("%s = '%s'", AttrScenario, tag)
	if a.Group != "" {
		q += fmt.Sprintf(" AND %s = '%s'", AttrGroup, a.Group)
	}
	if a.Below > 0 {
		q += fmt.Sprintf(" AND %s < %d", AttrIndex, a.Below)
	}
	switch a.Status {
	case FilterLive:
		q += " AND status IN ('PENDING', 'RUNNING', 'SLEEPING')"
	case FilterCompleted:
		q += " AND status = 'COMPLETED'"
	case FilterCancelled:
		q += " AND status = 'CANCELLED'"
	case FilterPaused:
		q += " AND paused = true"
	}
	if a.PausedOnly {
		q += " AND paused = true"
	}
	return q
}

var scenarioGroups = []string{"a", "b", "c"}

// ScenarioRunCount is the number of runs of a scenario.
const ScenarioRunCount = 10

// scenarioProgram is the program of run i of scenario name: a step, the
// wait for OperatorEvent (only the driver's acts end it), a step.
func scenarioProgram(name string, i int) Program {
	return Program{Key: fmt.Sprintf("%s-r%d", name, i), Ops: []Op{
		{Kind: KindStep, ID: "s1", OnErr: OnErrReturn, Outcomes: []Outcome{{Kind: OutOK, Value: i}}},
		{Kind: KindWait, ID: "w", OnErr: OnErrReturn, Name: OperatorEvent, Send: SendNever, TimeoutMS: HoldTimeoutMS},
		{Kind: KindStep, ID: "s2", OnErr: OnErrReturn, Outcomes: []Outcome{{Kind: OutOK, Value: 100 + i}}},
	}}
}

// GenerateScenario makes the n-th operator scenario of seed: its runs,
// random acts, then acts that end every run still live (resume each
// paused one, send each its event), so the scenario ends with every run
// ended.
func GenerateScenario(seed uint64, n int) Scenario {
	rng := rand.New(rand.NewPCG(seed, uint64(n)+0x0be7))
	s := Scenario{Name: fmt.Sprintf("op%d-%d", seed%100000, n)}
	for i := 0; i < ScenarioRunCount; i++ {
		r := ScenarioRun{Program: scenarioProgram(s.Name, i), Groups: []string{scenarioGroups[rng.IntN(len(scenarioGroups))]}}
		if rng.IntN(4) == 0 {
			r.Groups = append(r.Groups, scenarioGroups[rng.IntN(len(scenarioGroups))])
		}
		s.Runs = append(s.Runs, r)
	}
	m := newOpModel(s)
	pick := func() int { return rng.IntN(len(s.Runs)) }
	group := func() string {
		if rng.IntN(4) == 0 {
			return ""
		}
		return scenarioGroups[rng.IntN(len(scenarioGroups))]
	}
	below := func() int {
		if rng.IntN(3) == 0 {
			return 1 + rng.IntN(ScenarioRunCount)
		}
		return 0
	}
	payload := 0
	next := func() string { payload++; return "p" + strconv.Itoa(payload) }
	acts := 12 + rng.IntN(6)
	for len(s.Acts) < acts {
		var a Act
		switch k := rng.IntN(20); {
		case k < 5:
			a = Act{Kind: ActPause, Run: pick()}
		case k < 7:
			a = Act{Kind: ActResume, Run: pick()}
		case k < 10:
			a = Act{Kind: ActSend, Run: pick(), Payload: next()}
		case k < 11:
			a = Act{Kind: ActCancel, Run: pick()}
		case k < 13:
			st := []string{FilterAll, FilterLive, FilterCompleted, FilterCancelled, FilterPaused}
			a = Act{Kind: ActList, Group: group(), Below: below(), Status: st[rng.IntN(len(st))]}
		case k < 14:
			a = Act{Kind: ActCount, Group: group(), Below: below()}
		default:
			acts := []string{BatchCancel, BatchPause, BatchPause, BatchResume, BatchSignal, BatchSignal, BatchTerminate}
			a = Act{Kind: ActBatch, Action: acts[rng.IntN(len(acts))]}
			if a.Action == BatchSignal {
				a.Payload = next()
			}
			if rng.IntN(2) == 0 {
				// By ids: a few runs, one of them finished in one case
				// of three (the batch is then refused).
				live, ended := m.split()
				rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
				a.IDs = live[:min(len(live), 1+rng.IntN(3))]
				if len(ended) > 0 && (len(a.IDs) == 0 || rng.IntN(3) == 0) {
					a.IDs = append(a.IDs, ended[rng.IntN(len(ended))])
				}
				if len(a.IDs) == 0 {
					continue
				}
			} else {
				a.Group, a.Below = group(), below()
				a.PausedOnly = a.Action == BatchResume && rng.IntN(2) == 0
			}
		}
		m.apply(a)
		s.Acts = append(s.Acts, a)
	}
	// End every run: resume the paused ones, then send the live ones
	// their event.
	for i, r := range m.runs {
		if r.paused && !r.ended {
			a := Act{Kind: ActResume, Run: i}
			m.apply(a)
			s.Acts = append(s.Acts, a)
		}
	}
	for i, r := range m.runs {
		if !r.ended {
			a := Act{Kind: ActSend, Run: i, Payload: "final"}
			m.apply(a)
			s.Acts = append(s.Acts, a)
		}
	}
	return s
}

type opRun struct {
	ended       bool
	status, err string
	payload     string
	paused      bool
	cancel      bool
	events      []string
	groups      []string
}

// ActResult is what the model says an act answers.
type ActResult struct {
	// Conflict: the act is refused with an ErrConflict (a pause of a
	// finished run, a send to or a cancel of one, a batch listing one);
	// NotFound: with ErrNotFound (a batch whose query matches no live run).
	Conflict, NotFound bool
	// AlreadyPaused (pause), WasPaused (resume).
	AlreadyPaused, WasPaused bool
	// Matches are the runs a list finds, sorted.
	Matches []int
	// Counts are a count's, by status (LiveStatus for every live one).
	Counts map[string]int
	// Outcomes are a batch's, by run: "done" or "skipped".
	Outcomes map[int]string
	// Ends lists the runs the act ends (the driver waits for them).
	Ends []int
}

type opModel struct {
	runs []*opRun
}

func newOpModel(s Scenario) *opModel {
	m := &opModel{}
	for _, r := range s.Runs {
		m.runs = append(m.runs, &opRun{groups: r.Groups})
	}
	return m
}

// split returns the live and the ended runs.
func (m *opModel) split() (live, ended []int) {
	for i, r := range m.runs {
		if r.ended {
			ended = append(ended, i)
		} else {
			live = append(live, i)
		}
	}
	return live, ended
}

// settle ends run i if nothing holds it: a cancel request ends it
// CANCELLED (the wait returns the cancellation, which the program
// returns), else its oldest event completes it.
func (m *opModel) settle(i int, res *ActResult) {
	r := m.runs[i]
	if r.ended || r.paused {
		return
	}
	switch {
	case r.cancel:
		r.ended, r.status, r.err = true, StatusCancelled, CancelledError
	case len(r.events) > 0:
		r.ended, r.status, r.payload = true, StatusCompleted, r.events[0]
	default:
		return
	}
	res.Ends = append(res.Ends, i)
}

func (m *opModel) pause(i int, res *ActResult) (done bool) {
	r := m.runs[i]
	switch {
	case r.ended:
		res.Conflict = true
	case r.paused:
		res.AlreadyPaused = true
	default:
		r.paused = true
		return true
	}
	return false
}

func (m *opModel) resume(i int, res *ActResult) bool {
	r := m.runs[i]
	if !r.paused || r.ended {
		return false
	}
	r.paused = false
	res.WasPaused = true
	m.settle(i, res)
	return true
}

func (m *opModel) send(i int, payload string, res *ActResult) bool {
	r := m.runs[i]
	if r.ended {
		res.Conflict = true
		return false
	}
	r.events = append(r.events, payload)
	m.settle(i, res)
	return true
}

func (m *opModel) cancel(i int, res *ActResult) bool {
	r := m.runs[i]
	if r.ended {
		res.Conflict = true
		return false
	}
	r.cancel = true
	m.settle(i, res)
	return true
}

// terminate ends run i at once, paused or not: it is no longer paused.
func (m *opModel) terminate(i int, res *ActResult) bool {
	r := m.runs[i]
	if r.ended {
		res.Conflict = true
		return false
	}
	r.ended, r.status, r.err, r.paused = true, StatusCancelled, TerminatedBatchError, false
	res.Ends = append(res.Ends, i)
	return true
}

// matches reports whether run i matches a's query.
func (m *opModel) matches(a Act, i int) bool {
	r := m.runs[i]
	if a.Group != "" && !contains(r.groups, a.Group) {
		return false
	}
	if a.Below > 0 && i >= a.Below {
		return false
	}
	if a.PausedOnly && !r.paused {
		return false
	}
	switch a.Status {
	case FilterLive:
		return !r.ended
	case FilterCompleted:
		return r.ended && r.status == StatusCompleted
	case FilterCancelled:
		return r.ended && r.status == StatusCancelled
	case FilterPaused:
		return r.paused
	}
	return true
}

// apply plays a on the model and returns what it answers.
func (m *opModel) apply(a Act) ActResult {
	var res ActResult
	switch a.Kind {
	case ActPause:
		m.pause(a.Run, &res)
	case ActResume:
		m.resume(a.Run, &res)
	case ActSend:
		m.send(a.Run, a.Payload, &res)
	case ActCancel:
		m.cancel(a.Run, &res)
	case ActList:
		res.Matches = []int{}
		for i := range m.runs {
			if m.matches(a, i) {
				res.Matches = append(res.Matches, i)
			}
		}
	case ActCount:
		res.Counts = map[string]int{}
		for i, r := range m.runs {
			if !m.matches(a, i) {
				continue
			}
			st := LiveStatus
			if r.ended {
				st = r.status
			}
			res.Counts[st]++
		}
	case ActBatch:
		var set []int
		if a.IDs != nil {
			seen := map[int]bool{}
			for _, i := range a.IDs {
				if m.runs[i].ended {
					res.Conflict = true
					return res
				}
				if !seen[i] {
					seen[i] = true
					set = append(set, i)
				}
			}
		} else {
			for i, r := range m.runs {
				if !r.ended && m.matches(a, i) {
					set = append(set, i)
				}
			}
			if len(set) == 0 {
				res.NotFound = true
				return res
			}
		}
		res.Outcomes = map[int]string{}
		for _, i := range set {
			var scratch ActResult
			done := false
			switch a.Action {
			case BatchCancel:
				done = m.cancel(i, &scratch)
			case BatchPause:
				done = m.pause(i, &scratch)
			case BatchResume:
				done = m.resume(i, &scratch)
			case BatchSignal:
				done = m.send(i, a.Payload, &scratch)
			case BatchTerminate:
				done = m.terminate(i, &scratch)
			}
			res.Outcomes[i] = "skipped"
			if done {
				res.Outcomes[i] = "done"
			}
			res.Ends = append(res.Ends, scratch.Ends...)
		}
	default:
		panic(fmt.Sprintf("modeltest: act %q has no model", a.Kind))
	}
	sort.Ints(res.Ends)
	return res
}

// ScenarioEnd is how the model says a scenario's run ends.
type ScenarioEnd struct {
	Status string
	// Error (CANCELLED) or the wait's Payload (COMPLETED).
	Error, Payload string
}

// Output is the output of a run of the scenario that completed with the
// wait's payload: what its two steps and its wait observed.
func (s Scenario) Output(i int, payload string) Record {
	return Record{"s1": {V: intJSON(i)}, "w": {V: stringJSON(payload)}, "s2": {V: intJSON(100 + i)}}
}

// ScenarioModel plays a scenario act by act.
type ScenarioModel struct{ m *opModel }

// NewScenarioModel returns the model of s before its first act.
func NewScenarioModel(s Scenario) *ScenarioModel { return &ScenarioModel{m: newOpModel(s)} }

// Apply plays the next act and returns its answer.
func (sm *ScenarioModel) Apply(a Act) ActResult { return sm.m.apply(a) }

// Live reports whether run i is live, and paused.
func (sm *ScenarioModel) Live(i int) (live, paused bool) {
	r := sm.m.runs[i]
	return !r.ended, r.paused && !r.ended
}

// End is how run i ended (ok false while it is live).
func (sm *ScenarioModel) End(i int) (ScenarioEnd, bool) {
	r := sm.m.runs[i]
	return ScenarioEnd{Status: r.status, Error: r.err, Payload: r.payload}, r.ended
}

// PausePoint picks whether the i-th program of a seed is started again
// and paused (one in two of those whose runs a pause leaves as the model
// predicts them: one run, no deadline, only steps, sleeps, event waits,
// side effects, versions and durable state; a run retry policy is
// allowed; not Parallel groups, whose steps that finish after the first
// one recorded are run again once resumed), and how
// long after its start, in milliseconds, the pause comes: before its
// first claim, mid-step or mid-sleep, or after it ended.
func PausePoint(p Program, seed uint64, i int) (delayMS int, ok bool) {
	if p.Continue != nil || p.DeadlineMS > 0 || len(p.Ops) == 0 {
		return 0, false
	}
	pausable := true
	Walk(p.Ops, func(op *Op) {
		switch op.Kind {
		case KindStep, KindSleep, KindWait, KindSide, KindVersion, KindState:
		default:
			pausable = false
		}
	})
	rng := rand.New(rand.NewPCG(seed, uint64(i)+0x9a05e))
	if !pausable || rng.IntN(2) != 0 {
		return 0, false
	}
	return rng.IntN(40), true
}

// PauseByBatch says whether the i-th program of a seed that PausePoint
// picks is paused and resumed by batches (over a query of the search
// attributes it is started with) rather than one by one.
func PauseByBatch(seed uint64, i int) bool {
	return rand.New(rand.NewPCG(seed, uint64(i)+0xba7c)).IntN(2) == 0
}

// PausedGroup is the AttrGroup of the runs PauseByBatch picks.
const PausedGroup = "paused"

// PausesTag is the AttrScenario of the runs PauseByBatch picks.
func PausesTag(seed uint64) string { return fmt.Sprintf("pauses-%d", seed) }
