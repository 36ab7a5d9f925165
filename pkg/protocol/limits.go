package protocol

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits. Every bound on what a client, a worker or an operator may send is
// stated here once, and every edge that checks one (the SDKs, the CLI, the
// decoders of this package, the store) uses these constants and the
// validators of this package: two edges that disagreed on a bound would let
// a value pass one and be refused by the next, e.g. a worker whose hostname
// the SDK accepted and the reaper refused, whose leases were then never
// extended.
const (
	// MaxNameLen bounds, in bytes, every name: namespaces, queues,
	// workflow types, versions, step ids, event names, external ids, error
	// types, worker label keys and values, relay ids.
	MaxNameLen = 200
	// MaxHostnameLen bounds a worker's hostname (a DNS name is at most 253).
	MaxHostnameLen = 255
	// MaxLabels bounds the labels of one worker.
	MaxLabels = 64
	// MaxTypes bounds the workflow types one worker registers.
	MaxTypes = 1000
	// MaxCredits bounds the slots one work request may offer, and so a
	// worker's concurrency and the runs of one delivery or heartbeat.
	MaxCredits = 10000
	// MaxReportItems bounds one report.
	MaxReportItems = 10000
	// MaxEventNames bounds the event names a run's end lists
	// (ReportItem.EventNames); an execution that used more names ends
	// with ReportItem.AllEvents instead.
	MaxEventNames = 100
	// MaxDrainEvents bounds the events one drain (workflow.DrainEvents)
	// takes; so does the payload limit, which its list of payloads must
	// fit. The rest stay pending for the next drain.
	MaxDrainEvents = 1000
	// MaxErrorLen bounds a recorded error message; longer ones are cut at
	// a character boundary.
	MaxErrorLen = 8 << 10
	// DefaultPayloadWarnBytes and DefaultPayloadMaxBytes are the payload
	// limits of a new database (input, output, step output, event payload):
	// larger payloads are logged, and refused. The limits in force are the
	// database's (`kagzi limit`); workers are told them with every
	// delivery.
	DefaultPayloadWarnBytes = 1 << 20
	DefaultPayloadMaxBytes  = 2 << 20
	// EnvelopeReserve is the room a message needs around the one payload
	// it carries (a report item with its error, ids and timings, or a
	// chunk's fields): a payload travels in one NATS message only if it is
	// at most the server's max_payload minus this.
	EnvelopeReserve = 64 << 10
	// InlinePayloadBytes is the largest payload a delivery or a report
	// reply carries inline; larger ones are fetched on demand
	// (PayloadRequest), so a delivery's size does not grow with the sizes
	// of a run's payloads.
	InlinePayloadBytes = 16 << 10
	// NATSMaxPayload is the max_payload Kagzi runs NATS with (the CLI's
	// embedded server, compose, Kubernetes, the tests' servers): room for
	// a DefaultPayloadMaxBytes payload plus its envelope, where the
	// server's default of 1 MiB is not.
	NATSMaxPayload = 8 << 20
)

// MessagePayloadLimit is the largest payload one message can carry on a
// NATS server whose max_payload is natsMax.
func MessagePayloadLimit(natsMax int64) int {
	return int(max(natsMax-EnvelopeReserve, 0))
}

// ValidWorkerIdentity reports the first of a worker's hostname, version and
// labels that breaks a limit: hostname at most MaxHostnameLen bytes, version
// at most MaxNameLen, at most MaxLabels labels with non-empty keys, keys and
// values at most MaxNameLen bytes each.
func ValidWorkerIdentity(hostname, version string, labels map[string]string) error {
	switch {
	case len(hostname) > MaxHostnameLen:
		return fmt.Errorf("hostname is %d bytes, at most %d", len(hostname), MaxHostnameLen)
	case len(version) > MaxNameLen:
		return fmt.Errorf("version is %d bytes, at most %d", len(version), MaxNameLen)
	case len(labels) > MaxLabels:
		return fmt.Errorf("%d labels, at most %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > MaxNameLen || len(v) > MaxNameLen {
			return fmt.Errorf("label %q=%q: keys must be non-empty, keys and values at most %d bytes", k, v, MaxNameLen)
		}
	}
	return nil
}

// MaxEchoLen is how many characters of a name an error message repeats:
// enough to recognise it, never a flood (a 100 KB type name refused for
// its length).
const MaxEchoLen = 100

// Echo is s as an error message repeats it: cut to MaxEchoLen characters
// (the last one "…") when longer. Quote it (%q) where s may hold control
// characters.
func Echo(s string) string {
	if len(s) <= MaxEchoLen || utf8.RuneCountInString(s) <= MaxEchoLen {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxEchoLen-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// ClipText makes text from user code (an error message or type) fit a
// limit and any text column: NUL bytes and invalid UTF-8 are replaced, and
// the text is cut to at most n bytes at a character boundary. The SDK
// clips what it reports and the store what it records, with this one rule.
func ClipText(s string, n int) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
