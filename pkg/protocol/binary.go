package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
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

// The codec of the binary messages (binary_gen.go) is generated from the
// `kagzi:"N"` tags of their fields: N is a field's number on the wire, and
// the wire contract. Never reuse a number: a new field takes the next one,
// and older readers skip it. A field kept off the wire is tagged
// `kagzi:"-"`; a type of another package that travels inside a message
// (retry.Policy) carries the same tags. Zero values are left out, as
// JSON's omitempty does, except where presence means something: pointers,
// each element of a slice, nested structs held by value.
//
//go:generate go test -run ^TestBinaryCodecGenerated$ -update-codec .

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

// openNested starts a nested message as field: its length is written as
// one byte, which closeNested fills in, moving the body when the length
// needs more.
func openNested(b []byte, field int) ([]byte, int) {
	b = append(appendTag(b, field, wireBytes), 0)
	return b, len(b)
}

// closeNested ends the nested message opened at start.
func closeNested(b []byte, start int) []byte {
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
