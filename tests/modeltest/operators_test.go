package modeltest

import (
	"fmt"
	"reflect"
	"testing"
)

// TestScenarioModel plays a hand-written operator scenario on the model
// and checks every answer.
func TestScenarioModel(t *testing.T) {
	s := Scenario{Name: "t"}
	for i, g := range [][]string{{"a"}, {"a"}, {"b"}, {"b", "c"}} {
		s.Runs = append(s.Runs, ScenarioRun{Program: scenarioProgram("t", i), Groups: g})
	}
	m := NewScenarioModel(s)
	steps := []struct {
		act  Act
		want ActResult
	}{
		{Act{Kind: ActPause, Run: 0}, ActResult{}},
		{Act{Kind: ActPause, Run: 0}, ActResult{AlreadyPaused: true}},
		// A paused run stores its event and does not go on.
		{Act{Kind: ActSend, Run: 0, Payload: "x"}, ActResult{}},
		{Act{Kind: ActSend, Run: 1, Payload: "y"}, ActResult{Ends: []int{1}}},
		{Act{Kind: ActPause, Run: 1}, ActResult{Conflict: true}},
		{Act{Kind: ActResume, Run: 2}, ActResult{}},
		{Act{Kind: ActList, Group: "a", Status: FilterPaused}, ActResult{Matches: []int{0}}},
		{Act{Kind: ActList, Status: FilterLive}, ActResult{Matches: []int{0, 2, 3}}},
		{Act{Kind: ActCount}, ActResult{Counts: map[string]int{LiveStatus: 3, StatusCompleted: 1}}},
		{Act{Kind: ActCount, Group: "c"}, ActResult{Counts: map[string]int{LiveStatus: 1}}},
		{Act{Kind: ActList, Below: 2}, ActResult{Matches: []int{0, 1}}},
		// A batch by ids with a finished run is refused.
		{Act{Kind: ActBatch, Action: BatchCancel, IDs: []int{2, 1}}, ActResult{Conflict: true}},
		// A pause batch skips the paused run; a cancel of a paused run
		// waits for its resume.
		{Act{Kind: ActBatch, Action: BatchPause}, ActResult{Outcomes: map[int]string{0: "skipped", 2: "done", 3: "done"}}},
		{Act{Kind: ActBatch, Action: BatchCancel, Group: "b"}, ActResult{Outcomes: map[int]string{2: "done", 3: "done"}}},
		{Act{Kind: ActBatch, Action: BatchResume, Group: "b", PausedOnly: true}, ActResult{Outcomes: map[int]string{2: "done", 3: "done"}, Ends: []int{2, 3}}},
		{Act{Kind: ActBatch, Action: BatchSignal, Group: "b"}, ActResult{NotFound: true}},
		{Act{Kind: ActResume, Run: 0}, ActResult{WasPaused: true, Ends: []int{0}}},
	}
	for n, st := range steps {
		got := m.Apply(st.act)
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("act %d (%s): %+v, want %+v", n+1, st.act, got, st.want)
		}
	}
	wantEnds := []ScenarioEnd{{Status: StatusCompleted, Payload: "x"}, {Status: StatusCompleted, Payload: "y"},
		{Status: StatusCancelled, Error: CancelledError}, {Status: StatusCancelled, Error: CancelledError}}
	for i, w := range wantEnds {
		if e, ok := m.End(i); !ok || e != w {
			t.Errorf("run %d: %+v (ended %v), want %+v", i, e, ok, w)
		}
	}
}

// TestGenerateScenario: scenarios are a function of their seed and index,
// end every run, and use every act and batch action.
func TestGenerateScenario(t *testing.T) {
	kinds := map[string]int{}
	for n := 0; n < 20; n++ {
		s := GenerateScenario(DefaultSeed, n)
		if again := GenerateScenario(DefaultSeed, n); fmt.Sprint(again) != fmt.Sprint(s) {
			t.Fatalf("scenario %d differs when generated again", n)
		}
		m := NewScenarioModel(s)
		for _, a := range s.Acts {
			res := m.Apply(a)
			k := a.Kind
			if a.Kind == ActBatch {
				k += " " + a.Action
				switch {
				case res.Conflict:
					k = "batch refused (ErrConflict)"
				case res.NotFound:
					k = "batch refused (ErrNotFound)"
				}
			}
			kinds[k]++
		}
		for i := range s.Runs {
			if _, ok := m.End(i); !ok {
				t.Errorf("scenario %d: run %d left live", n, i)
			}
		}
	}
	for _, k := range []string{ActPause, ActResume, ActSend, ActCancel, ActList, ActCount, "batch cancel", "batch pause", "batch resume",
		"batch signal", "batch terminate", "batch refused (ErrConflict)"} {
		if kinds[k] == 0 {
			t.Errorf("no %s act in 20 scenarios: %v", k, kinds)
		}
	}
	t.Logf("acts: %v", kinds)
}
