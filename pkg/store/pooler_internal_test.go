package store

import (
	"strconv"
	"strings"
	"testing"
)

// The bound a transaction through a pooler sets is the one Connect's
// pools set for their sessions.
func TestBeginBoundedTimeout(t *testing.T) {
	want := "SET LOCAL " + idleParam + " = " + strconv.Itoa(int(IdleInTransactionTimeout.Milliseconds()))
	if !strings.HasSuffix(beginBounded, want) {
		t.Errorf("beginBounded = %q, want it to end in %q", beginBounded, want)
	}
}
