package cliutil

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// ProgressEvery is the least time between two redraws of a progress line:
// at most four a second, so a fast loop does not spend its time on the
// terminal.
const ProgressEvery = 250 * time.Millisecond

// ProgressEnv forces the progress line on ("1") or off ("0") whatever
// standard error is: tests of a command's progress have no terminal, and
// a person may want none on one. Any other value is a usage error.
//
// KAGZI_PROGRESS: the progress line of `run export`, `run fork-many`,
// `schedule backfill`, `migrate` and `bench` on standard error (count,
// rate, ETA when the total is known, time taken; redrawn at most 4 times
// a second, then a final line): unset, on a terminal only and not with
// `--json`; `1` always; `0` never; anything else is a usage error.
const ProgressEnv = "KAGZI_PROGRESS"

// Progress is the line a long command redraws on a terminal's standard
// error (carriage return, no newline) with how much it has done, how fast
// and, when it knows the total, when it will be done; Done ends it with a
// final line and a newline. A nil *Progress does nothing, so a command
// calls it whether or not a line is shown.
//
// The line holds only the fixed label and numbers: it is written past
// TermSafe (which would escape the carriage return), so it must never
// carry a field.
type Progress struct {
	w     io.Writer
	label string
	now   func() time.Time

	mu    sync.Mutex
	n     int64
	total int64 // 0: unknown
	start time.Time
	drawn time.Time // the last redraw; zero before the first
	width int       // the last line's length, to blank what is left of it
	done  bool
	stop  chan struct{}
	ended chan struct{}
}

// NewProgress returns a progress line labelled label (a fixed string, such
// as "exporting runs") written to w, with total the count expected (0 if
// unknown) and now the clock (time.Now; tests give their own).
func NewProgress(w io.Writer, label string, total int64, now func() time.Time) *Progress {
	return &Progress{w: w, label: label, total: total, now: now, start: now()}
}

// Progress returns the progress line for cmd, labelled label with total
// the count expected (0 if unknown), or nil (nothing shown) with --json
// or when standard error is not a terminal, unless ProgressEnv says
// otherwise. The line goes to the terminal unescaped (see Progress).
func (a *App) Progress(cmd *cobra.Command, label string, total int64) (*Progress, error) {
	w := cmd.ErrOrStderr()
	if t, ok := w.(*TermSafe); ok {
		w = t.Unwrap()
	}
	// The name written out: the configuration reference finds the
	// variables the CLI reads by their literal names.
	switch v := os.Getenv("KAGZI_PROGRESS"); v {
	case "0":
		return nil, nil
	case "1":
	case "":
		if a.JSON || !IsTerminal(w) {
			return nil, nil
		}
	default:
		return nil, Usagef("%s=%q: use 1 (always show progress) or 0 (never)", ProgressEnv, v)
	}
	return NewProgress(w, label, total, time.Now), nil
}

// IsTerminal reports whether w is a character device (a terminal), by
// its file mode: no terminal library is needed for that.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Add counts n more done and redraws the line if the last redraw is
// ProgressEvery old.
func (p *Progress) Add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	p.redrawLocked()
}

// SetTotal sets the count expected, once it is known.
func (p *Progress) SetTotal(total int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = total
}

// AddTotal adds n to the count expected: for work whose parts learn
// their size one after another.
func (p *Progress) AddTotal(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += n
}

// Tick redraws the line if the last redraw is ProgressEvery old: the
// elapsed time moves while one long step runs.
func (p *Progress) Tick() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redrawLocked()
}

// Start redraws the line every ProgressEvery until Done, for commands
// whose count moves seldom or only at the end (one transaction). Done
// must follow.
func (p *Progress) Start() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil || p.done {
		return
	}
	p.stop, p.ended = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.ended)
		t := time.NewTicker(ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.Tick()
			}
		}
	}()
}

// Done sets the count to n (if n >= 0; -1 keeps the count added) and
// writes the final line: the count, the time taken and the rate, ended
// by a newline. Calls after the first do nothing.
func (p *Progress) Done(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done = true
	stop, ended := p.stop, p.ended
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-ended
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n >= 0 {
		p.n = n
	}
	elapsed := p.now().Sub(p.start)
	p.writeLocked(fmt.Sprintf("%s: %d in %s (%s)", p.label, p.n, fmtElapsed(elapsed), fmtRate(p.n, elapsed)), "\n")
}

// redrawLocked writes the line if the last redraw (or, before the first,
// the start) is ProgressEvery old: a command done sooner shows its final
// line alone.
func (p *Progress) redrawLocked() {
	if p.done {
		return
	}
	now := p.now()
	last := p.drawn
	if last.IsZero() {
		last = p.start
	}
	if now.Sub(last) < ProgressEvery {
		return
	}
	p.drawn = now
	p.writeLocked(p.lineLocked(now), "")
}

// lineLocked is the line as of now: "label: 1200/5000 (24%), 400/s, ETA
// 10s, 3s", without total "label: 1200, 400/s, 3s".
func (p *Progress) lineLocked(now time.Time) string {
	elapsed := now.Sub(p.start)
	var b strings.Builder
	b.WriteString(p.label)
	b.WriteString(": ")
	if p.total > 0 {
		fmt.Fprintf(&b, "%d/%d (%d%%)", p.n, p.total, p.n*100/p.total)
	} else {
		fmt.Fprintf(&b, "%d", p.n)
	}
	fmt.Fprintf(&b, ", %s", fmtRate(p.n, elapsed))
	if p.total > 0 {
		b.WriteString(", ETA ")
		b.WriteString(eta(p.n, p.total, elapsed))
	}
	fmt.Fprintf(&b, ", %s", fmtElapsed(elapsed))
	return b.String()
}

// writeLocked writes "\r" + line, blanks what is left of a longer last
// line, then end.
func (p *Progress) writeLocked(line, end string) {
	pad := ""
	if p.width > len(line) {
		pad = strings.Repeat(" ", p.width-len(line))
	}
	p.width = len(line)
	_, _ = io.WriteString(p.w, "\r"+line+pad+end)
}

// fmtRate is n over d per second: one decimal under 10/s.
func fmtRate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-/s"
	}
	r := float64(n) / d.Seconds()
	if r < 10 {
		return fmt.Sprintf("%.1f/s", r)
	}
	return fmt.Sprintf("%.0f/s", r)
}

// eta is the time left at the rate so far, in whole seconds; "?" before
// anything is done.
func eta(n, total int64, elapsed time.Duration) string {
	if n <= 0 || elapsed <= 0 {
		return "?"
	}
	if n >= total {
		return "0s"
	}
	left := time.Duration(float64(elapsed) * float64(total-n) / float64(n))
	return fmtElapsed(left)
}

// fmtElapsed is d in whole seconds (1m5s), tenths under 10 s (2.5s).
func fmtElapsed(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
