package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// Encoding is how a message is written on the wire.
type Encoding uint8

// Encodings.
const (
	// JSON is every message's encoding, and the only one an older
	// process reads.
	JSON Encoding = iota
	// Binary is the compact form of the messages on the path of every run
	// (WorkRequest, Delivery, DeliveryAck, Report, ReportReply); the
	// others are JSON whatever is asked. See docs/ARCHITECTURE.md,
	// "Wire encoding".
	Binary
)

// HeaderEncodings is the NATS header by which a process says which
// encodings it reads besides JSON: a dispatcher's beacons carry it, so a
// worker sends binary only once every dispatcher it hears reads it.
const HeaderEncodings = "Kagzi-Encodings"

// EncodingsBinary is HeaderEncodings' value for a reader of Binary.
const EncodingsBinary = "binary"

// binaryMagic starts every binary message: 0xC1 appears nowhere in UTF-8,
// so it never starts JSON text, and Decode tells the two apart by it.
const binaryMagic = 0xC1

// Binary message types, the byte after binaryMagic: decoding one type as
// another is an error, as in JSON a missing required field is.
const (
	binWorkRequest = 1 + iota
	binDelivery
	binDeliveryAck
	binReport
	binReportReply
)

// Wire types of a field's tag (its number << 3 | wire type), as in
// Protocol Buffers: a reader skips fields it does not know, so a field can
// be added without a new protocol version.
const (
	wireVarint = 0
	wireBytes  = 2
)

// binaryMessage is a Message with a binary form.
type binaryMessage interface {
	Message
	binaryType() byte
	appendBinary(b []byte) []byte
	// decodeBinary reads the fields after the header.
	decodeBinary(data []byte) error
}

// EncodingOf tells the encoding of an encoded message, so that an answer
// can be given in the encoding of the question.
func EncodingOf(data []byte) Encoding {
	if len(data) > 0 && data[0] == binaryMagic {
		return Binary
	}
	return JSON
}

// EncodeAs is Encode in encoding enc; a message without a binary form is
// JSON whatever enc says.
func EncodeAs(m Message, enc Encoding) ([]byte, error) {
	bm, ok := m.(binaryMessage)
	if enc != Binary || !ok {
		return Encode(m)
	}
	m.setVersion()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	b := make([]byte, 0, 256)
	b = append(b, binaryMagic, bm.binaryType())
	b = binary.AppendUvarint(b, Version)
	return bm.appendBinary(b), nil
}

// decodeBinary is Decode of a message starting with binaryMagic.
func decodeBinary(data []byte, m Message) error {
	bm, ok := m.(binaryMessage)
	if !ok {
		return invalid(m, "no binary form")
	}
	if len(data) < 2 || data[1] != bm.binaryType() {
		return invalid(m, "not a binary %T", m)
	}
	v, n := binary.Uvarint(data[2:])
	if n <= 0 {
		return invalid(m, "binary: bad version")
	}
	if v != Version {
		return invalid(m, "protocol version %d, want %d", v, Version)
	}
	if err := bm.decodeBinary(data[2+n:]); err != nil {
		return invalid(m, "binary: %v", err)
	}
	m.setVersion()
	return m.Validate()
}

// Appending. Zero values are left out, as JSON's omitempty does, except
// where presence means something (pointers, repeated nested messages).

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendUint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

func appendInt(b []byte, field int, v int64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendVarint(appendTag(b, field, wireVarint), v)
}

// appendIntPtr writes *v (zero too) if v is not nil: its presence means
// something.
func appendIntPtr(b []byte, field int, v *int64) []byte {
	if v == nil {
		return b
	}
	return binary.AppendVarint(appendTag(b, field, wireVarint), *v)
}

func appendBool(b []byte, field int, v bool) []byte {
	if !v {
		return b
	}
	return append(appendTag(b, field, wireVarint), 1)
}

func appendFloat(b []byte, field int, v float64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, field, wireVarint), math.Float64bits(v))
}

func appendRaw(b []byte, field int, p []byte) []byte {
	b = binary.AppendUvarint(appendTag(b, field, wireBytes), uint64(len(p)))
	return append(b, p...)
}

func appendBytes(b []byte, field int, p []byte) []byte {
	if len(p) == 0 {
		return b
	}
	return appendRaw(b, field, p)
}

// appendStr writes s always; invalid UTF-8 becomes U+FFFD, as JSON's
// encoder makes it, so what is sent is text a reader accepts.
func appendStr(b []byte, field int, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = binary.AppendUvarint(appendTag(b, field, wireBytes), uint64(len(s)))
	return append(b, s...)
}

func appendString(b []byte, field int, s string) []byte {
	if s == "" {
		return b
	}
	return appendStr(b, field, s)
}

func appendUUID(b []byte, field int, id uuid.UUID) []byte {
	if id == uuid.Nil {
		return b
	}
	return appendRaw(b, field, id[:])
}

// appendTime writes t (if not nil) as seconds since 1970 (zigzag),
// nanoseconds and, unless UTC, the zone's offset in seconds (zigzag): the
// instant and offset JSON's RFC 3339 keeps.
func appendTime(b []byte, field int, t *time.Time) []byte {
	if t == nil {
		return b
	}
	var tmp [3 * binary.MaxVarintLen64]byte
	p := binary.AppendVarint(tmp[:0], t.Unix())
	p = binary.AppendUvarint(p, uint64(t.Nanosecond()))
	if _, off := t.Zone(); off != 0 {
		p = binary.AppendVarint(p, int64(off))
	}
	return appendRaw(b, field, p)
}

// appendNested writes the message body encodes as field: the body is
// written in place after a one-byte length, moved when the length needs
// more.
func appendNested(b []byte, field int, body func([]byte) []byte) []byte {
	b = append(appendTag(b, field, wireBytes), 0)
	start := len(b)
	b = body(b)
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	var tmp [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(tmp[:], uint64(n))
	b = append(b, tmp[:l-1]...)
	copy(b[start-1+l:], b[start:start+n])
	copy(b[start-1:], tmp[:l])
	return b
}

// reader reads fields; the first error sticks and ends the reading.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// next reads the next field's tag; false at the end or on an error.
func (r *reader) next() (field, wire int, ok bool) {
	if len(r.b) == 0 || r.err != nil {
		return 0, 0, false
	}
	t := r.uvarint()
	if r.err != nil {
		return 0, 0, false
	}
	if t>>3 == 0 || t>>3 > math.MaxInt32 {
		r.fail("bad field number %d", t>>3)
		return 0, 0, false
	}
	return int(t >> 3), int(t & 7), true
}

// skip passes over a field the reader does not know.
func (r *reader) skip(wire int) {
	switch wire {
	case wireVarint:
		r.uvarint()
	case wireBytes:
		r.raw(wireBytes)
	default:
		r.fail("unknown wire type %d", wire)
	}
}

func (r *reader) want(got, want int) bool {
	if got != want {
		r.fail("wire type %d, want %d", got, want)
		return false
	}
	return true
}

func (r *reader) uint(wire int) uint64 {
	if !r.want(wire, wireVarint) {
		return 0
	}
	return r.uvarint()
}

func (r *reader) int(wire int) int64 {
	if !r.want(wire, wireVarint) {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) integer(wire int) int { return int(r.int(wire)) }

func (r *reader) bool(wire int) bool {
	switch r.uint(wire) {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad bool")
	return false
}

func (r *reader) float(wire int) float64 {
	return math.Float64frombits(r.uint(wire))
}

// raw returns the field's bytes, aliasing the message.
func (r *reader) raw(wire int) []byte {
	if !r.want(wire, wireBytes) {
		return nil
	}
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("truncated")
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// bytes returns a copy of the field's bytes (nil when empty).
func (r *reader) bytes(wire int) []byte {
	p := r.raw(wire)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *reader) string(wire int) string {
	p := r.raw(wire)
	if !utf8.Valid(p) {
		r.fail("invalid UTF-8")
		return ""
	}
	return intern(p)
}

// intern returns the constants messages repeat without allocating.
func intern(p []byte) string {
	switch string(p) {
	case "":
		return ""
	case string(ResultOK):
		return string(ResultOK)
	case string(ReportStepCompleted):
		return string(ReportStepCompleted)
	case string(ReportRunCompleted):
		return string(ReportRunCompleted)
	case "COMPLETED":
		return "COMPLETED"
	case "FUNCTION":
		return "FUNCTION"
	}
	return string(p)
}

func (r *reader) uuid(wire int) uuid.UUID {
	var id uuid.UUID
	p := r.raw(wire)
	if r.err == nil && len(p) != len(id) {
		r.fail("uuid of %d bytes", len(p))
	}
	copy(id[:], p)
	return id
}

// time reads a time JSON could carry too: a year of 0 to 9999 in its
// zone, an offset of whole minutes under a day.
func (r *reader) time(wire int) *time.Time {
	sub := reader{b: r.raw(wire)}
	if r.err != nil {
		return nil
	}
	s, n := binary.Varint(sub.b)
	if n <= 0 {
		r.fail("bad time")
		return nil
	}
	sub.b = sub.b[n:]
	ns := sub.uvarint()
	var off int64
	if len(sub.b) > 0 {
		if off, n = binary.Varint(sub.b); n <= 0 || off == 0 || off%60 != 0 || off <= -86400 || off >= 86400 {
			r.fail("bad time zone")
			return nil
		}
		sub.b = sub.b[n:]
	}
	const maxSec = 1 << 40 // beyond year 9999 either way
	if sub.err != nil || len(sub.b) != 0 || ns >= 1e9 || s < -maxSec || s > maxSec {
		r.fail("bad time")
		return nil
	}
	t := time.Unix(s, int64(ns)).UTC()
	if off != 0 {
		t = t.In(time.FixedZone("", int(off)))
	}
	if y := t.Year(); y < 0 || y > 9999 {
		r.fail("time out of range")
		return nil
	}
	return &t
}

// sub returns a reader of a nested message's fields; join takes its
// error back. (A nested reader passed to a function value would escape to
// the heap, one allocation per nested message.)
func (r *reader) sub(wire int) reader { return reader{b: r.raw(wire)} }

func (r *reader) join(sub *reader) {
	if sub.err != nil {
		r.fail("%v", sub.err)
	}
}

// fields calls fn for every field until the end or an error.
func (r *reader) fields(fn func(field, wire int)) {
	for {
		f, w, ok := r.next()
		if !ok {
			return
		}
		fn(f, w)
	}
}

// Messages. Field numbers are the wire contract: never reuse one; a new
// field takes the next number, and older readers skip it.

func appendTypes(b []byte, field int, tvs []TypeVersion) []byte {
	for i := range tvs {
		tv := &tvs[i]
		b = appendNested(b, field, func(b []byte) []byte {
			b = appendString(b, 1, tv.Type)
			return appendString(b, 2, tv.Version)
		})
	}
	return b
}

func (r *reader) typeVersion(wire int) TypeVersion {
	var tv TypeVersion
	sub := r.sub(wire)
	sub.fields(func(f, w int) {
		switch f {
		case 1:
			tv.Type = sub.string(w)
		case 2:
			tv.Version = sub.string(w)
		default:
			sub.skip(w)
		}
	})
	r.join(&sub)
	return tv
}

func appendPolicy(b []byte, field int, p *retry.Policy) []byte {
	if p == nil {
		return b
	}
	return appendNested(b, field, func(b []byte) []byte {
		b = appendInt(b, 1, int64(p.MaxAttempts))
		b = appendFloat(b, 2, p.BackoffCoefficient)
		b = appendFloat(b, 3, p.Jitter)
		for _, t := range p.NonRetryable {
			b = appendStr(b, 4, t)
		}
		b = appendInt(b, 5, p.InitialIntervalMS)
		return appendInt(b, 6, p.MaxIntervalMS)
	})
}

func (r *reader) policy(wire int) *retry.Policy {
	p := &retry.Policy{}
	sub := r.sub(wire)
	sub.fields(func(f, w int) {
		switch f {
		case 1:
			p.MaxAttempts = sub.integer(w)
		case 2:
			p.BackoffCoefficient = sub.float(w)
		case 3:
			p.Jitter = sub.float(w)
		case 4:
			p.NonRetryable = append(p.NonRetryable, sub.string(w))
		case 5:
			p.InitialIntervalMS = sub.int(w)
		case 6:
			p.MaxIntervalMS = sub.int(w)
		default:
			sub.skip(w)
		}
	})
	r.join(&sub)
	return p
}

func (m *WorkRequest) binaryType() byte { return binWorkRequest }

func (m *WorkRequest) appendBinary(b []byte) []byte {
	b = appendUUID(b, 1, m.WorkerID)
	b = appendString(b, 2, m.Namespace)
	b = appendString(b, 3, m.Queue)
	b = appendInt(b, 4, int64(m.Credits))
	b = appendTypes(b, 5, m.Types)
	b = appendUint(b, 6, m.Seq)
	return appendInt(b, 7, m.WaitMS)
}

func (m *WorkRequest) decodeBinary(data []byte) error {
	*m = WorkRequest{}
	r := &reader{b: data}
	r.fields(func(f, w int) {
		switch f {
		case 1:
			m.WorkerID = r.uuid(w)
		case 2:
			m.Namespace = r.string(w)
		case 3:
			m.Queue = r.string(w)
		case 4:
			m.Credits = r.integer(w)
		case 5:
			m.Types = append(m.Types, r.typeVersion(w))
		case 6:
			m.Seq = r.uint(w)
		case 7:
			m.WaitMS = r.int(w)
		default:
			r.skip(w)
		}
	})
	return r.err
}

func (m *Delivery) binaryType() byte { return binDelivery }

func (m *Delivery) appendBinary(b []byte) []byte {
	b = appendUUID(b, 1, m.WorkerID)
	b = appendUint(b, 2, m.Seq)
	for i := range m.Runs {
		b = appendNested(b, 3, m.Runs[i].appendBinary)
	}
	return appendNested(b, 4, func(b []byte) []byte {
		b = appendInt(b, 1, int64(m.Limits.WarnBytes))
		return appendInt(b, 2, int64(m.Limits.MaxBytes))
	})
}

func (m *Delivery) decodeBinary(data []byte) error {
	*m = Delivery{}
	r := &reader{b: data}
	r.fields(func(f, w int) {
		switch f {
		case 1:
			m.WorkerID = r.uuid(w)
		case 2:
			m.Seq = r.uint(w)
		case 3:
			m.Runs = append(m.Runs, DeliveredRun{})
			sub := r.sub(w)
			m.Runs[len(m.Runs)-1].decodeBinary(&sub)
			r.join(&sub)
		case 4:
			sub := r.sub(w)
			sub.fields(func(f, w int) {
				switch f {
				case 1:
					m.Limits.WarnBytes = sub.integer(w)
				case 2:
					m.Limits.MaxBytes = sub.integer(w)
				default:
					sub.skip(w)
				}
			})
			r.join(&sub)
		default:
			r.skip(w)
		}
	})
	return r.err
}

func (d *DeliveredRun) appendBinary(b []byte) []byte {
	b = appendUUID(b, 1, d.RunID)
	b = appendString(b, 2, d.Namespace)
	b = appendString(b, 3, d.Queue)
	b = appendString(b, 4, d.Type)
	b = appendString(b, 5, d.Version)
	b = appendInt(b, 6, int64(d.Attempt))
	b = appendInt(b, 7, d.LeaseToken)
	b = appendBytes(b, 8, d.Input)
	for i := range d.Steps {
		b = appendNested(b, 9, d.Steps[i].appendBinary)
	}
	b = appendString(b, 10, d.TraceParent)
	b = appendTime(b, 11, d.DeadlineAt)
	b = appendPolicy(b, 12, d.RetryPolicy)
	b = appendTime(b, 13, d.AvailableAt)
	b = appendInt(b, 14, int64(d.InputSize))
	b = appendTime(b, 15, d.CancelRequestedAt)
	return appendIntPtr(b, 16, d.EventSeq)
}

func (d *DeliveredRun) decodeBinary(r *reader) {
	r.fields(func(f, w int) {
		switch f {
		case 1:
			d.RunID = r.uuid(w)
		case 2:
			d.Namespace = r.string(w)
		case 3:
			d.Queue = r.string(w)
		case 4:
			d.Type = r.string(w)
		case 5:
			d.Version = r.string(w)
		case 6:
			d.Attempt = r.integer(w)
		case 7:
			d.LeaseToken = r.int(w)
		case 8:
			d.Input = r.bytes(w)
		case 9:
			d.Steps = append(d.Steps, StepState{})
			sub := r.sub(w)
			d.Steps[len(d.Steps)-1].decodeBinary(&sub)
			r.join(&sub)
		case 10:
			d.TraceParent = r.string(w)
		case 11:
			d.DeadlineAt = r.time(w)
		case 12:
			d.RetryPolicy = r.policy(w)
		case 13:
			d.AvailableAt = r.time(w)
		case 14:
			d.InputSize = r.integer(w)
		case 15:
			d.CancelRequestedAt = r.time(w)
		case 16:
			v := r.int(w)
			d.EventSeq = &v
		default:
			r.skip(w)
		}
	})
}

func (s *StepState) appendBinary(b []byte) []byte {
	b = appendString(b, 1, s.StepID)
	b = appendString(b, 2, s.Status)
	b = appendInt(b, 3, int64(s.Attempt))
	b = appendBytes(b, 4, s.Output)
	b = appendString(b, 5, s.Error)
	b = appendString(b, 6, s.ErrorType)
	b = appendTime(b, 7, s.RetryAt)
	b = appendInt(b, 8, int64(s.RunAttempt))
	b = appendInt(b, 9, int64(s.Tries))
	b = appendInt(b, 10, int64(s.OutputSize))
	return appendBool(b, 11, s.NonRetryable)
}

func (s *StepState) decodeBinary(r *reader) {
	r.fields(func(f, w int) {
		switch f {
		case 1:
			s.StepID = r.string(w)
		case 2:
			s.Status = r.string(w)
		case 3:
			s.Attempt = r.integer(w)
		case 4:
			s.Output = r.bytes(w)
		case 5:
			s.Error = r.string(w)
		case 6:
			s.ErrorType = r.string(w)
		case 7:
			s.RetryAt = r.time(w)
		case 8:
			s.RunAttempt = r.integer(w)
		case 9:
			s.Tries = r.integer(w)
		case 10:
			s.OutputSize = r.integer(w)
		case 11:
			s.NonRetryable = r.bool(w)
		default:
			r.skip(w)
		}
	})
}

func (m *DeliveryAck) binaryType() byte { return binDeliveryAck }

func (m *DeliveryAck) appendBinary(b []byte) []byte { return appendBool(b, 1, m.Accepted) }

func (m *DeliveryAck) decodeBinary(data []byte) error {
	*m = DeliveryAck{}
	r := &reader{b: data}
	r.fields(func(f, w int) {
		if f == 1 {
			m.Accepted = r.bool(w)
		} else {
			r.skip(w)
		}
	})
	return r.err
}

func (m *Report) binaryType() byte { return binReport }

func (m *Report) appendBinary(b []byte) []byte {
	b = appendUUID(b, 1, m.WorkerID)
	b = appendString(b, 2, m.Namespace)
	for i := range m.Items {
		b = appendNested(b, 3, m.Items[i].appendBinary)
	}
	return b
}

func (m *Report) decodeBinary(data []byte) error {
	*m = Report{}
	r := &reader{b: data}
	r.fields(func(f, w int) {
		switch f {
		case 1:
			m.WorkerID = r.uuid(w)
		case 2:
			m.Namespace = r.string(w)
		case 3:
			m.Items = append(m.Items, ReportItem{})
			sub := r.sub(w)
			m.Items[len(m.Items)-1].decodeBinary(&sub)
			r.join(&sub)
		default:
			r.skip(w)
		}
	})
	return r.err
}

func (it *ReportItem) appendBinary(b []byte) []byte {
	b = appendString(b, 1, string(it.Kind))
	b = appendUUID(b, 2, it.RunID)
	b = appendInt(b, 3, it.LeaseToken)
	b = appendString(b, 4, it.StepID)
	b = appendString(b, 5, it.StepKind)
	b = appendInt(b, 6, int64(it.Attempt))
	b = appendBytes(b, 7, it.Output)
	b = appendString(b, 8, it.Error)
	b = appendString(b, 9, it.ErrorType)
	b = appendBool(b, 10, it.NonRetryable)
	b = appendTime(b, 11, it.Until)
	b = appendTime(b, 12, it.StartedAt)
	b = appendTime(b, 13, it.FinishedAt)
	b = appendString(b, 14, it.Name)
	b = appendBool(b, 15, it.Suspend)
	for _, s := range it.Steps {
		b = appendStr(b, 16, s)
	}
	b = appendBool(b, 17, it.Events)
	if c := it.Child; c != nil {
		b = appendNested(b, 18, func(b []byte) []byte {
			b = appendString(b, 1, c.Type)
			b = appendString(b, 2, c.Version)
			b = appendString(b, 3, c.Queue)
			b = appendBytes(b, 4, c.Input)
			b = appendPolicy(b, 5, c.RetryPolicy)
			b = appendInt(b, 6, int64(c.Priority))
			return appendString(b, 7, c.ParentClosePolicy)
		})
	}
	b = appendIntPtr(b, 19, it.EventsSeen)
	for _, n := range it.EventNames {
		b = appendStr(b, 20, n)
	}
	return appendBool(b, 21, it.AllEvents)
}

func (it *ReportItem) decodeBinary(r *reader) {
	r.fields(func(f, w int) {
		switch f {
		case 1:
			it.Kind = ReportKind(r.string(w))
		case 2:
			it.RunID = r.uuid(w)
		case 3:
			it.LeaseToken = r.int(w)
		case 4:
			it.StepID = r.string(w)
		case 5:
			it.StepKind = r.string(w)
		case 6:
			it.Attempt = r.integer(w)
		case 7:
			it.Output = r.bytes(w)
		case 8:
			it.Error = r.string(w)
		case 9:
			it.ErrorType = r.string(w)
		case 10:
			it.NonRetryable = r.bool(w)
		case 11:
			it.Until = r.time(w)
		case 12:
			it.StartedAt = r.time(w)
		case 13:
			it.FinishedAt = r.time(w)
		case 14:
			it.Name = r.string(w)
		case 15:
			it.Suspend = r.bool(w)
		case 16:
			it.Steps = append(it.Steps, r.string(w))
		case 17:
			it.Events = r.bool(w)
		case 18:
			c := &ChildSpec{}
			it.Child = c
			sub := r.sub(w)
			sub.fields(func(f, w int) {
				switch f {
				case 1:
					c.Type = sub.string(w)
				case 2:
					c.Version = sub.string(w)
				case 3:
					c.Queue = sub.string(w)
				case 4:
					c.Input = sub.bytes(w)
				case 5:
					c.RetryPolicy = sub.policy(w)
				case 6:
					c.Priority = sub.integer(w)
				case 7:
					c.ParentClosePolicy = sub.string(w)
				default:
					sub.skip(w)
				}
			})
			r.join(&sub)
		case 19:
			v := r.int(w)
			it.EventsSeen = &v
		case 20:
			it.EventNames = append(it.EventNames, r.string(w))
		case 21:
			it.AllEvents = r.bool(w)
		default:
			r.skip(w)
		}
	})
}

func (m *ReportReply) binaryType() byte { return binReportReply }

func (m *ReportReply) appendBinary(b []byte) []byte {
	for i := range m.Results {
		res := &m.Results[i]
		b = appendNested(b, 1, func(b []byte) []byte {
			b = appendString(b, 1, string(res.Code))
			b = appendString(b, 2, res.Message)
			b = appendBytes(b, 3, res.Output)
			b = appendBool(b, 4, res.Waiting)
			b = appendInt(b, 5, int64(res.OutputSize))
			return appendBool(b, 6, res.CancelRequested)
		})
	}
	return b
}

func (m *ReportReply) decodeBinary(data []byte) error {
	*m = ReportReply{}
	r := &reader{b: data}
	r.fields(func(f, w int) {
		if f != 1 {
			r.skip(w)
			return
		}
		m.Results = append(m.Results, ReportResult{})
		res := &m.Results[len(m.Results)-1]
		sub := r.sub(w)
		sub.fields(func(f, w int) {
			switch f {
			case 1:
				res.Code = ResultCode(sub.string(w))
			case 2:
				res.Message = sub.string(w)
			case 3:
				res.Output = sub.bytes(w)
			case 4:
				res.Waiting = sub.bool(w)
			case 5:
				res.OutputSize = sub.integer(w)
			case 6:
				res.CancelRequested = sub.bool(w)
			default:
				sub.skip(w)
			}
		})
		r.join(&sub)
	})
	return r.err
}
