package protocol

import (
	"strings"

	"github.com/google/uuid"
)

// SubjectProgressAll matches every RunProgress (the console subscribes).
const SubjectProgressAll = Prefix + "progress.>"

// ProgressPrefixes are the step id prefixes whose completion is a run's
// progress that readers outside the run follow: durable state
// ("state:"), stream entries ("stream:") and answers to updates
// ("update:"). A NOTIFY trigger (migration 011) names such steps, and the
// relay publishes them as RunProgress.
var ProgressPrefixes = []string{"state:", "stream:", "update:"}

// IsProgressStep reports whether a step id is one of a run's progress
// steps (see ProgressPrefixes).
func IsProgressStep(stepID string) bool {
	for _, p := range ProgressPrefixes {
		if strings.HasPrefix(stepID, p) {
			return true
		}
	}
	return false
}

// SubjectProgress is where the progress of one run is published.
func SubjectProgress(namespace string, runID uuid.UUID) string {
	return Prefix + "progress." + namespace + "." + runID.String()
}

// SubjectProgressNamespace matches the progress of every run of a
// namespace.
func SubjectProgressNamespace(namespace string) string {
	return Prefix + "progress." + namespace + ".*"
}

// RunProgress tells that a run recorded a progress step (see
// ProgressPrefixes) in a committed transaction. It is a wakeup, not the
// data: a reader that was told reads the step from Postgres, so a reader
// that subscribes first and reads second misses nothing.
type RunProgress struct {
	Versioned
	Namespace string    `json:"ns"`
	RunID     uuid.UUID `json:"run_id"`
	StepID    string    `json:"step_id"`
}

// Validate implements Message.
func (m *RunProgress) Validate() error {
	if err := checkToken(m, "namespace", m.Namespace); err != nil {
		return err
	}
	if err := checkID(m, "run id", m.RunID); err != nil {
		return err
	}
	if !IsProgressStep(m.StepID) || len(m.StepID) > MaxNameLen {
		return invalid(m, "step id %q is not a progress step", m.StepID)
	}
	return nil
}
