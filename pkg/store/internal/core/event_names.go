package core

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Event names and trigger patterns (docs/triggers.md): pure checks and
// matching, shared by the store's triggers and start batches.

// ErrEventPattern is a malformed event pattern or published event name;
// it is an ErrInvalidArgument.
var ErrEventPattern = fmt.Errorf("%w: event pattern", ErrInvalidArgument)

// checkEventTokens checks a dotted event name (wild false) or pattern
// (wild true): 1 to protocol.MaxNameLen bytes of tokens that are each a
// protocol.ValidToken, or, in a pattern, "*" or a last ">".
func checkEventTokens(what, s string, wild bool) error {
	if s == "" || len(s) > protocol.MaxNameLen {
		return fmt.Errorf("%w: %s must be 1 to %d bytes, is %d", ErrEventPattern, what, protocol.MaxNameLen, len(s))
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if wild && (t == "*" || (t == ">" && i == len(toks)-1)) {
			continue
		}
		if err := protocol.ValidToken(what+" token", t); err != nil {
			hint := ""
			if wild && t == ">" {
				hint = ` (">" may only be the last token)`
			}
			return fmt.Errorf("%w: %s %q: %v%s", ErrEventPattern, what, protocol.Echo(s), err, hint)
		}
	}
	return nil
}

// CheckEventPattern checks a trigger's pattern (ErrEventPattern).
func CheckEventPattern(p string) error { return checkEventTokens("event pattern", p, true) }

// CheckPublishedEventName checks a published event's name: dotted tokens
// without wildcards (ErrEventPattern).
func CheckPublishedEventName(n string) error { return checkEventTokens("event name", n, false) }

// PatternMatches reports whether the event name matches pattern (both
// valid): "*" matches one token, a last ">" one or more.
func PatternMatches(pattern, name string) bool {
	ps, ns := strings.Split(pattern, "."), strings.Split(name, ".")
	for i, p := range ps {
		if p == ">" && i == len(ps)-1 {
			return len(ns) > i
		}
		if i >= len(ns) || (p != "*" && p != ns[i]) {
			return false
		}
	}
	return len(ps) == len(ns)
}

// TriggerInputAt is the run input a trigger takes from an event's payload: all
// of it, or the value of its top-level key path (null if it has none or
// is not an object).
func TriggerInputAt(payload []byte, path string) []byte {
	if path == "" {
		return payload
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(payload, &obj) != nil {
		return []byte("null")
	}
	if v, ok := obj[path]; ok {
		return v
	}
	return []byte("null")
}
