package cliutil

import (
	"fmt"
	"io"
	"sync"
	"unicode"
	"unicode/utf8"
)

// TermSafe is every byte the CLI prints, on standard output and standard
// error alike, on its way out: it escapes each control character but
// newline and tab (C0, DEL and C1, as \u001b) and each byte that is not
// UTF-8 (as \xff). Whatever a field holds (an external id stored before
// ids were checked, an error message from user code, a name echoed in an
// error), it cannot move the cursor, clear the screen or retitle the
// operator's terminal. The escapes are JSON's own, so --json output stays
// valid JSON; encoding/json leaves DEL and C1 characters raw.
//
// The CLI itself prints no control character but newline and tab: a
// command that ever needs one (a progress line's carriage return) writes
// to Unwrap() the fixed bytes it means, and never a field through it.
type TermSafe struct {
	// mu serialises writers that share the stream (the services' logs
	// under kagzi dev), which would otherwise race on pending.
	mu sync.Mutex
	w  io.Writer
	// pending is the start of a UTF-8 sequence the last Write cut off.
	pending []byte
}

// NewTermSafe returns a TermSafe writing to w.
func NewTermSafe(w io.Writer) *TermSafe { return &TermSafe{w: w} }

// Write escapes p and writes it; it reports len(p) written on success.
func (t *TermSafe) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := p
	if len(t.pending) > 0 {
		buf = append(t.pending, p...)
		t.pending = nil
	}
	out := make([]byte, 0, len(buf)+8)
	for i := 0; i < len(buf); {
		c := buf[i]
		if c < utf8.RuneSelf {
			if (c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t' {
				out = append(out, c)
			} else {
				out = fmt.Appendf(out, `\u%04x`, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			t.pending = append([]byte(nil), buf[i:]...)
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, c)
		case unicode.IsControl(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, buf[i:i+size]...)
		}
		i += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what a cut-off UTF-8 sequence left pending.
func (t *TermSafe) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		return nil
	}
	var out []byte
	for _, c := range t.pending {
		out = fmt.Appendf(out, `\x%02x`, c)
	}
	t.pending = nil
	_, err := t.w.Write(out)
	return err
}

// Unwrap is the writer TermSafe escapes for.
func (t *TermSafe) Unwrap() io.Writer { return t.w }
