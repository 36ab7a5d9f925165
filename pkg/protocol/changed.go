package protocol

import "github.com/google/uuid"

// SubjectChangedAll matches every RunsChanged (the console subscribes).
const SubjectChangedAll = Prefix + "changed.>"

// MaxChangedRuns caps the run ids of one RunsChanged; a publisher splits
// longer lists.
const MaxChangedRuns = 1000

// SubjectChanged is where the dispatcher tells, after commit, which runs
// of a namespace it changed (claimed, stepped, suspended, finished).
func SubjectChanged(namespace string) string {
	return Prefix + "changed." + namespace
}

// RunsChanged names runs whose row changed in a committed transaction.
// It carries ids only: a reader that cares reads the rows. It is a hint
// for views (the console), never a wakeup the engine depends on; the
// dispatcher publishes one per claim or report batch, not one per run.
type RunsChanged struct {
	Versioned
	Namespace string      `json:"ns"`
	Runs      []uuid.UUID `json:"runs"`
}

// Validate implements Message.
func (m *RunsChanged) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if len(m.Runs) == 0 || len(m.Runs) > MaxChangedRuns {
		return invalid(m, "%d runs, want 1 to %d", len(m.Runs), MaxChangedRuns)
	}
	for _, id := range m.Runs {
		if err := checkID(m, "run id", id); err != nil {
			return err
		}
	}
	return nil
}
