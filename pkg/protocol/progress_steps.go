package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// The step ids of durable state and streams. A workflow's State.Set
// records the step "state:<key>#<n>" for the n-th Set of that key in the
// run; a Stream's Write records "stream:<name>#<n>" for its n-th entry
// (from 1) and its Close "stream:<name>#end". The workflow SDK writes
// them, the store reads them back by key or name and number; both build
// and parse them here.
const (
	// StatePrefix and StreamPrefix begin the step ids of state values
	// and stream entries (see ProgressPrefixes).
	StatePrefix  = "state:"
	StreamPrefix = "stream:"
	// StreamEnd is the suffix of the step that closes a stream.
	StreamEnd = "end"

	// MaxStateSets bounds the Sets of one state key in one run, and
	// MaxStreamEntries the entries of one stream in one run: each is a
	// step of the run's history, which every delivery of the run carries.
	// A workflow that needs more continues as new.
	MaxStateSets     = 10000
	MaxStreamEntries = 10000
	// MaxProgressNameLen bounds a state key or stream name, so that its
	// longest step id ("stream:<name>#10000") is a valid step id.
	MaxProgressNameLen = MaxNameLen - len(StreamPrefix) - 1 - 5
)

// ValidProgressName checks a state key or a stream name (what says which):
// a token (ValidToken) of at most MaxProgressNameLen bytes without '#',
// which separates the number in the step id.
func ValidProgressName(what, s string) error {
	if err := ValidToken(what, s); err != nil {
		return err
	}
	if len(s) > MaxProgressNameLen {
		return fmt.Errorf("%s is %d bytes, at most %d", what, len(s), MaxProgressNameLen)
	}
	if strings.ContainsRune(s, '#') {
		return fmt.Errorf("%s %q must not contain #", what, Echo(s))
	}
	return nil
}

// StateStepID is the step id of the n-th (from 1) Set of a state key.
func StateStepID(key string, n int) string {
	return StatePrefix + key + "#" + strconv.Itoa(n)
}

// StreamStepID is the step id of a stream's n-th (from 1) entry.
func StreamStepID(name string, n int) string {
	return StreamPrefix + name + "#" + strconv.Itoa(n)
}

// StreamEndStepID is the step id of the step that closes a stream.
func StreamEndStepID(name string) string {
	return StreamPrefix + name + "#" + StreamEnd
}

// ParseProgressStepID splits a state or stream step id into its prefix
// (StatePrefix or StreamPrefix), key or name, and number; end is true for
// a stream's closing step (n is then 0). ok is false for any other id.
func ParseProgressStepID(id string) (prefix, name string, n int, end, ok bool) {
	switch {
	case strings.HasPrefix(id, StatePrefix):
		prefix = StatePrefix
	case strings.HasPrefix(id, StreamPrefix):
		prefix = StreamPrefix
	default:
		return "", "", 0, false, false
	}
	name, num, found := strings.Cut(id[len(prefix):], "#")
	if !found || name == "" {
		return "", "", 0, false, false
	}
	if prefix == StreamPrefix && num == StreamEnd {
		return prefix, name, 0, true, true
	}
	v, err := strconv.Atoi(num)
	if err != nil || v < 1 || strconv.Itoa(v) != num {
		return "", "", 0, false, false
	}
	return prefix, name, v, false, true
}
