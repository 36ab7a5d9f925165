package ops

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/durations"
	"github.com/kagzi/kagzi/pkg/store"
)

func NewRetentionCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:   "retention",
		Short: "Show or change how long finished runs are kept",
		Long: `Finished runs are deleted, with their steps, payloads and events, once they
are older than their retention period: by default 7 days for COMPLETED and
CANCELLED runs and 30 days for FAILED runs (dead letters, which can be
retried until then). A namespace may set its own periods, and a workflow
type in it its own; a period it does not set is inherited. 0 keeps runs for
ever. The reaper deletes them; archive first with kagzi run export.`,
		Example: `  kagzi retention show
  kagzi retention set --completed 3d --failed 90d
  kagzi retention set --type Report --completed 12h
  kagzi retention remove --type Report`,
	})
	c.AddCommand(newRetentionShowCmd(a), newRetentionSetCmd(a), newRetentionRemoveCmd(a))
	return c
}

// PeriodJSON is one retention period as the retention commands print it.
type PeriodJSON struct {
	// Seconds is the period (0: kept for ever).
	Seconds int64 `json:"seconds"`
	// Text is the period as the flags take it (7d, 12h, forever).
	Text string `json:"text"`
	// From says whose policy sets it: default, namespace or type.
	From string `json:"from"`
}

// ScopeJSON is the retention of the default, a namespace or a type.
type ScopeJSON struct {
	Type      string     `json:"type,omitempty"`
	Completed PeriodJSON `json:"completed"`
	Failed    PeriodJSON `json:"failed"`
}

// RetentionJSON is what `retention show` and `retention set` print.
type RetentionJSON struct {
	Namespace string      `json:"namespace"`
	Default   ScopeJSON   `json:"default"`
	Own       ScopeJSON   `json:"namespace_periods"`
	Types     []ScopeJSON `json:"types"`
}

// retentionView resolves the policies of a.Namespace for printing.
func retentionView(ns string, pols []store.RetentionPolicy) RetentionJSON {
	// scope resolves one scope's periods, innermost policy first.
	scope := func(typ string, chain ...[2]string) ScopeJSON {
		s := ScopeJSON{Type: typ}
		for _, which := range []struct {
			out *PeriodJSON
			get func(store.RetentionPolicy) *time.Duration
		}{
			{&s.Completed, func(p store.RetentionPolicy) *time.Duration { return p.KeepCompleted }},
			{&s.Failed, func(p store.RetentionPolicy) *time.Duration { return p.KeepFailed }},
		} {
		find:
			for _, k := range chain {
				for _, p := range pols {
					if p.Namespace == k[0] && p.Type == k[1] && which.get(p) != nil {
						d := *which.get(p)
						from := "type"
						switch {
						case k[0] == "":
							from = "default"
						case k[1] == "":
							from = "namespace"
						}
						*which.out = PeriodJSON{Seconds: int64(d / time.Second), Text: fmtKeep(d), From: from}
						break find
					}
				}
			}
		}
		return s
	}
	out := RetentionJSON{Namespace: ns, Default: scope("", [2]string{"", ""}),
		Own: scope("", [2]string{ns, ""}, [2]string{"", ""}), Types: []ScopeJSON{}}
	for _, p := range pols {
		if p.Namespace == ns && p.Type != "" {
			out.Types = append(out.Types, scope(p.Type, [2]string{ns, p.Type}, [2]string{ns, ""}, [2]string{"", ""}))
		}
	}
	return out
}

func printRetention(v RetentionJSON) func(io.Writer) {
	return func(w io.Writer) {
		cell := func(p PeriodJSON, here string) string {
			if p.From == here {
				return p.Text
			}
			return p.Text + " (" + p.From + ")"
		}
		fmt.Fprintln(w, "SCOPE\tCOMPLETED, CANCELLED\tFAILED")
		fmt.Fprintf(w, "every namespace (default)\t%s\t%s\n", v.Default.Completed.Text, v.Default.Failed.Text)
		fmt.Fprintf(w, "namespace %s\t%s\t%s\n", v.Namespace, cell(v.Own.Completed, "namespace"), cell(v.Own.Failed, "namespace"))
		for _, t := range v.Types {
			fmt.Fprintf(w, "type %s\t%s\t%s\n", t.Type, cell(t.Completed, "type"), cell(t.Failed, "type"))
		}
	}
}

func showRetention(a *cliutil.App, cmd *cobra.Command, st *store.Store) error {
	pols, err := st.RetentionList(cmd.Context(), a.Namespace)
	if err != nil {
		return err
	}
	v := retentionView(a.Namespace, pols)
	return a.Print(cmd, v, printRetention(v))
}

func newRetentionShowCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show how long the namespace's finished runs are kept",
		Long: `Show the retention periods of the namespace: the default of every
namespace, the namespace's (a period it does not set says where it comes
from) and those of its workflow types that have their own.`,
		Example: `  kagzi retention show
  kagzi --namespace shop --json retention show`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			return showRetention(a, cmd, st)
		},
	}
}

func newRetentionSetCmd(a *cliutil.App) *cobra.Command {
	var (
		typ, completed, failed string
		all                    bool
	)
	c := &cobra.Command{
		Use:   "set",
		Short: "Change how long finished runs are kept",
		Long: `Set the retention periods of the namespace, of one workflow type in it
(--type), or the default of every namespace without its own
(--all-namespaces). A period is days (7d), a Go duration (12h, 90m), both
(1d12h), or 0 / forever to keep runs for ever; at least a minute. A period
not given keeps its value (is inherited, for a new policy). The reaper
applies a change within the hour, and deletes at once what a shorter
period makes expired: export it first (kagzi run export) to keep a copy.`,
		Example: `  kagzi retention set --completed 3d --failed 90d
  kagzi retention set --type Report --completed 12h --failed forever
  kagzi retention set --all-namespaces --completed 14d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := store.RetentionSetParams{Namespace: a.Namespace, Type: typ}
			if all {
				if typ != "" {
					return cliutil.Usagef("--type belongs to a namespace: drop --all-namespaces")
				}
				p.Namespace = ""
			}
			var err error
			if p.KeepCompleted, err = parseKeep("--completed", completed); err != nil {
				return err
			}
			if p.KeepFailed, err = parseKeep("--failed", failed); err != nil {
				return err
			}
			if p.KeepCompleted == nil && p.KeepFailed == nil {
				return cliutil.Usagef("give --completed, --failed or both")
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if _, err := st.RetentionSet(cmd.Context(), p); err != nil {
				return err
			}
			return showRetention(a, cmd, st)
		},
	}
	f := c.Flags()
	f.StringVar(&typ, "type", "", "set the periods of this workflow type only")
	f.StringVar(&completed, "completed", "", "how long COMPLETED and CANCELLED runs are kept (e.g. 7d; 0 keeps them)")
	f.StringVar(&failed, "failed", "", "how long FAILED runs are kept (e.g. 30d; 0 keeps them)")
	f.BoolVar(&all, "all-namespaces", false, "set the default of every namespace without periods of its own")
	return c
}

func newRetentionRemoveCmd(a *cliutil.App) *cobra.Command {
	var typ string
	c := &cobra.Command{
		Use:   "remove",
		Short: "Remove the namespace's (or a type's) own periods",
		Long: `Remove the namespace's own retention periods, or with --type those of one
workflow type: they inherit again (a type the namespace's, the namespace
the default).`,
		Example: `  kagzi retention remove --type Report
  kagzi retention remove`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.RetentionDelete(cmd.Context(), a.Namespace, typ); err != nil {
				return err
			}
			return showRetention(a, cmd, st)
		},
	}
	c.Flags().StringVar(&typ, "type", "", "remove this workflow type's periods")
	return c
}

// parseKeep reads a retention period flag ("" : not given): days (7d),
// a Go duration (12h), days then a duration (1d12h), or 0 / forever.
func parseKeep(flag, s string) (*time.Duration, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return nil, nil
	}
	if s == "0" || s == "forever" {
		var zero time.Duration
		return &zero, nil
	}
	d, err := durations.Parse(s)
	switch {
	case errors.Is(err, durations.ErrTooLong), err == nil && d > store.MaxKeep:
		return nil, cliutil.Usagef("%s %s is above the maximum %s; 0 or forever keeps runs for ever", flag, s, durations.Format(store.MaxKeep))
	case err != nil || d < 0:
		return nil, cliutil.Usagef("%s %q: give days (7d), a duration (12h), both (1d12h), or 0 / forever", flag, s)
	}
	return &d, nil
}

// fmtKeep prints a period as parseKeep reads it.
func fmtKeep(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	return cliutil.FmtDur(d)
}
