package tracectx

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// NewBirth returns a fresh W3C traceparent (version 00, sampled) for a run
// created outside any trace: every run has a trace from birth, so the
// dispatcher's and the workers' spans of all its executions join one trace
// instead of each starting a root of their own. Its span id is derived
// from its trace id (birthSpanID), which marks it as the store's: the
// dispatcher reports the root span under that id (kagzi.run, from the
// run's creation to its first claim), so the trace has a real root.
func NewBirth() (string, error) {
	var tid [16]byte
	if _, err := rand.Read(tid[:]); err != nil {
		return "", fmt.Errorf("generate trace context: %w", err)
	}
	// An all-zero trace id is invalid; with 128 random bits that is not
	// going to happen, but it must not make the context unusable.
	tid[0] |= 1
	sid := birthSpanID(tid)
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-01", nil
}

// birthSpanID is the root span id of a trace NewBirth started.
func birthSpanID(tid [16]byte) [8]byte {
	var sid [8]byte
	for i := range sid {
		sid[i] = tid[i] ^ tid[i+8] ^ 0x6b
	}
	if sid == [8]byte{} {
		sid[7] = 1
	}
	return sid
}

// BirthRoot reports whether tc is a trace context NewBirth made for a run
// created outside any trace, with its trace and root span ids. A context
// from a real span matches only by a 1 in 2^64 chance; a continued run's
// copy (random flag set, see the store's RunsContinueAsNew) does not.
func BirthRoot(tc string) (traceID [16]byte, spanID [8]byte, ok bool) {
	parts := strings.Split(tc, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || parts[3] != "01" {
		return traceID, spanID, false
	}
	if _, err := hex.Decode(traceID[:], []byte(parts[1])); err != nil {
		return traceID, spanID, false
	}
	if _, err := hex.Decode(spanID[:], []byte(parts[2])); err != nil {
		return traceID, spanID, false
	}
	return traceID, spanID, spanID == birthSpanID(traceID)
}
