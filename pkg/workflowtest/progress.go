package workflowtest

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// State returns the latest value the run set for st (workflow.State.Set),
// decoded into T, and its version (the number of Sets; 0 if never set),
// as client.GetState would read it.
func State[T any](e *Env, st workflow.State[T]) (T, int, error) {
	var v T
	version := 0
	var raw json.RawMessage
	for _, s := range e.Steps() {
		prefix, key, n, _, ok := protocol.ParseProgressStepID(s.ID)
		if ok && prefix == protocol.StatePrefix && key == st.Key() && s.Status == "COMPLETED" && n > version {
			version, raw = n, s.Output
		}
	}
	if version == 0 {
		return v, 0, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, version, fmt.Errorf("workflowtest: state %q does not decode into %T: %w", st.Key(), v, err)
	}
	return v, version, nil
}

// StreamEntries returns the entries the run wrote to s
// (workflow.Stream.Write), decoded into T, in index order, and whether it
// closed the stream, as client.ReadStream would read them.
func StreamEntries[T any](e *Env, s workflow.Stream[T]) ([]T, bool, error) {
	type entry struct {
		n   int
		raw json.RawMessage
	}
	var entries []entry
	closed := false
	for _, st := range e.Steps() {
		prefix, name, n, end, ok := protocol.ParseProgressStepID(st.ID)
		if !ok || prefix != protocol.StreamPrefix || name != s.Name() || st.Status != "COMPLETED" {
			continue
		}
		if end {
			closed = true
			continue
		}
		entries = append(entries, entry{n, st.Output})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].n < entries[j].n })
	out := make([]T, len(entries))
	for i, en := range entries {
		if err := json.Unmarshal(en.raw, &out[i]); err != nil {
			return nil, closed, fmt.Errorf("workflowtest: stream %q entry %d does not decode into %T: %w", s.Name(), en.n, out[i], err)
		}
	}
	return out, closed, nil
}
