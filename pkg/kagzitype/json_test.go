package kagzitype_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kagzi/kagzi/pkg/kagzitype"
)

// keys returns the JSON object keys of v, in order of encoding.
func keys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var out []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// An application that encodes a run or a schedule sees the fields the
// client documents, in their order, and none of the engine's bookkeeping.
func TestJSONShowsTheApplicationsFields(t *testing.T) {
	run := []string{"ID", "Namespace", "ExternalID", "Queue", "Type", "Version", "Status", "Attempts", "AvailableAt",
		"Error", "CreatedAt", "StartedAt", "FinishedAt", "DeadlineAt", "RetryPolicy", "Priority", "ParentRunID",
		"ParentStepID", "ScheduleID", "ScheduleFireAt", "CancelRequestedAt", "ContinuedAs", "ForkedFrom",
		"ForkedAtStep", "Forks", "DebounceKey", "DebounceStarts", "ConcurrencyKey", "RateLimitKey", "Paused", "Input", "Output"}
	if got := keys(t, kagzitype.Run{}); !reflect.DeepEqual(got, run) {
		t.Errorf("Run encodes\n%v\nwant\n%v", got, run)
	}
	schedule := []string{"ID", "Namespace", "Queue", "Type", "Version", "Cron", "Timezone", "Input", "MaxCatchup",
		"Status", "NextFireAt", "LastFiredAt", "CreatedAt", "RetryPolicy", "Overlap", "Jitter", "BufferedFireAt",
		"ConcurrencyKey", "RateLimitKey"}
	if got := keys(t, kagzitype.Schedule{}); !reflect.DeepEqual(got, schedule) {
		t.Errorf("Schedule encodes\n%v\nwant\n%v", got, schedule)
	}
}
