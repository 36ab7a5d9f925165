package cliutil

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/store"
)

// RunsTable prints runs as a table; fired adds the schedule fire time.
func RunsTable(w io.Writer, runs []store.Run, fired bool) {
	if fired {
		fmt.Fprintln(w, "RUN ID\tFIRE TIME\tTYPE\tQUEUE\tSTATUS\tATTEMPTS\tCREATED")
		for _, r := range runs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, FmtTimeP(r.ScheduleFireAt), r.Type, r.Queue, RunStatus(r),
				r.Attempts, FmtTime(r.CreatedAt))
		}
		return
	}
	fmt.Fprintln(w, "RUN ID\tTYPE\tQUEUE\tSTATUS\tATTEMPTS\tCREATED\tEXTERNAL ID")
	for _, r := range runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Type, r.Queue, RunStatus(r), r.Attempts,
			FmtTime(r.CreatedAt), OrDash(r.ExternalID))
	}
}

// RunStatus is a run's STATUS cell: its status, marked "(paused)" while
// the run is paused. A paused run keeps its status (docs/pause.md), as a
// paused workflow stays Running in Temporal, and `status = 'RUNNING'`
// still finds it; PAUSED alone is a paused schedule's status.
func RunStatus(r store.Run) string {
	if r.Paused != nil {
		return string(r.Status) + " (paused)"
	}
	return string(r.Status)
}

// Ago formats a past time as an age ("3s ago") for liveness columns.
func Ago(t time.Time) string {
	d := time.Since(t)
	if d < 0 {
		d = 0
	}
	return FmtDur(d.Round(time.Second)) + " ago"
}

// ParseWhen reads a time flag: an RFC 3339 time, or an age before now.
func ParseWhen(flag, s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	age, err := ParseAge(s)
	if errors.Is(err, durations.ErrTooLong) {
		return time.Time{}, Usagef("--%s %s is above the maximum age %s", flag, s, durations.Format(durations.Longest))
	}
	if err != nil {
		return time.Time{}, Usagef("--%s %q: give a time (2025-01-01T00:00:00Z) or an age (6d, 36h)", flag, s)
	}
	return now.Add(-age), nil
}

// ParseAge reads a non-negative age: days (7d), a Go duration (12h) or
// both (1d12h).
func ParseAge(s string) (time.Duration, error) {
	d, err := durations.Parse(s)
	if err == nil && d < 0 {
		return 0, fmt.Errorf("age %s is negative", s)
	}
	return d, err
}

// DeprecatedAlias registers old as a former name of the string flag
// named name, bound to the same variable: it still works for one
// release, hidden from the help; UsedName says it is deprecated.
func DeprecatedAlias(f *pflag.FlagSet, v *string, old, name string) {
	f.StringVar(v, old, "", "former name of --"+name)
	_ = f.MarkDeprecated(old, "use --"+name)
}

// UsedName is the name of the flag a user set among a flag and its
// former names (DeprecatedAlias), so that an error names what was typed;
// a former name used gets a notice on standard error. (pflag's own
// notice goes to the flag set's output, which cobra keeps for parse
// errors.)
func UsedName(cmd *cobra.Command, name string, former ...string) string {
	for _, o := range former {
		if cmd.Flags().Changed(o) {
			fmt.Fprintf(cmd.ErrOrStderr(), "Flag --%s has been deprecated, use --%s\n", o, name)
			return o
		}
	}
	return name
}

// Warn prints a warning on standard error: what the command did but the
// user should know, on a line of its own so that --json output stays
// whole.
func Warn(cmd *cobra.Command, format string, args ...any) {
	fmt.Fprintf(cmd.ErrOrStderr(), "Warning: "+format+"\n", args...)
}

// TypeAt is a workflow type as users write it: TYPE, or TYPE@VERSION.
func TypeAt(typ, version string) string {
	if version == "" {
		return typ
	}
	return typ + "@" + version
}
