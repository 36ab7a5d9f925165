package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
)

// ErrInvalid is wrapped by every decoding and validation error: the message
// is malformed and must be counted, logged and dropped.
var ErrInvalid = errors.New("invalid message")

// Message is implemented by every wire type.
type Message interface {
	// Validate reports the first malformed field.
	Validate() error
	setVersion()
	version() int
}

// Versioned is embedded in every message: the protocol version.
type Versioned struct {
	V int `json:"v"`
}

func (v *Versioned) setVersion()  { v.V = Version }
func (v *Versioned) version() int { return v.V }

// Encode validates m, stamps the protocol version and encodes it.
func Encode(m Message) ([]byte, error) {
	m.setVersion()
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("encode %T: %w", m, err)
	}
	return json.Marshal(m)
}

// Decode parses data into m strictly: unknown fields, trailing data, a
// wrong version or an invalid field are errors wrapping ErrInvalid. data
// is JSON or, for the messages that have one, the binary form (see
// EncodeAs); the binary form skips fields it does not know.
func Decode(data []byte, m Message) error {
	if EncodingOf(data) == Binary {
		return decodeBinary(data, m)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(m); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrInvalid, m, err)
	}
	// dec.More would miss a trailing '}' or ']': only whitespace may follow.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: %T: trailing data", ErrInvalid, m)
	}
	if m.version() != Version {
		return fmt.Errorf("%w: %T: protocol version %d, want %d", ErrInvalid, m, m.version(), Version)
	}
	if err := m.Validate(); err != nil {
		return err
	}
	return nil
}

func invalid(m any, format string, args ...any) error {
	return fmt.Errorf("%w: %T: %s", ErrInvalid, m, fmt.Sprintf(format, args...))
}

func checkToken(m any, what, s string) error {
	if err := ValidToken(what, s); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrInvalid, m, err)
	}
	return nil
}

func checkID(m any, what string, id uuid.UUID) error {
	if id == uuid.Nil {
		return invalid(m, "%s is required", what)
	}
	return nil
}

func checkName(m any, what, s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	return checkToken(m, what, s)
}

func checkJSON(m any, what string, raw json.RawMessage) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return invalid(m, "%s is not valid JSON", what)
	}
	return nil
}

// TypeVersion is a workflow type at a version, as a worker registers it.
type TypeVersion struct {
	Type    string `json:"type" kagzi:"1"`
	Version string `json:"version" kagzi:"2"`
}

func checkTypes(m any, tvs []TypeVersion) error {
	if len(tvs) == 0 {
		return invalid(m, "at least one workflow type is required")
	}
	if len(tvs) > MaxTypes {
		return invalid(m, "%d workflow types, at most %d", len(tvs), MaxTypes)
	}
	seen := make(map[string]bool, len(tvs))
	for _, tv := range tvs {
		if err := checkToken(m, "workflow type", tv.Type); err != nil {
			return err
		}
		if err := checkName(m, "version", tv.Version, false); err != nil {
			return err
		}
		if seen[tv.Type+"@"+tv.Version] {
			return invalid(m, "workflow type %q at version %q listed twice", tv.Type, tv.Version)
		}
		seen[tv.Type+"@"+tv.Version] = true
	}
	return nil
}
