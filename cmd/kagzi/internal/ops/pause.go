package ops

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
)

// NewQueueCmd is `kagzi queue`: pausing and resuming task queues.
func NewQueueCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "queue",
		Aliases: []string{"queues"},
		Short:   "Pause and resume task queues",
		Example: `  kagzi queue pause orders --reason "database maintenance"
  kagzi queue paused
  kagzi queue resume orders`,
	})
	c.AddCommand(newScopePauseCmd(a, "queue"), newScopeResumeCmd(a, "queue"), newScopePausedCmd(a, "queue"))
	return c
}

// PausedJSON is a paused queue or workflow type as the pause commands
// print it.
type PausedJSON struct {
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"paused_at"`
	// Changed is false when it was paused already (the first pause kept).
	Changed bool `json:"changed"`
}

func toPausedJSON(p client.PausedScope, changed bool) PausedJSON {
	return PausedJSON{Kind: p.Kind, Name: p.Name, By: p.By, Reason: p.Reason, At: p.At.UTC(), Changed: changed}
}

// scopeNoun is how the commands name a kind of pause.
func scopeNoun(kind string) string {
	if kind == "type" {
		return "workflow type"
	}
	return "task queue"
}

func newScopePauseCmd(a *cliutil.App, kind string) *cobra.Command {
	var pf cliutil.PauseFlags
	arg := "QUEUE"
	if kind == "type" {
		arg = "TYPE"
	}
	c := &cobra.Command{
		Use:   "pause " + arg + " [--reason TEXT] [--by NAME]",
		Short: "Pause a " + scopeNoun(kind) + ": none of its runs is claimed until resumed",
		Long: `Pause a ` + scopeNoun(kind) + ` of the namespace: no run of it is claimed until it is
resumed. Runs that hold a lease go on until they next suspend (a sleep, an
event wait, a retry backoff) or end, then wait; runs started meanwhile
wait. Pausing it again changes nothing. See also kagzi run pause.`,
		Example: "  kagzi " + kindCmd(kind) + " pause " + exampleName(kind) + ` --reason "incident 42"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			o := client.PauseOptions{Reason: pf.Reason, By: pf.Who()}
			var p client.PausedScope
			var already bool
			if kind == "type" {
				p, already, err = cl.PauseType(cmd.Context(), args[0], o)
			} else {
				p, already, err = cl.PauseQueue(cmd.Context(), args[0], o)
			}
			if err != nil {
				return err
			}
			return a.Print(cmd, toPausedJSON(p, !already), func(w io.Writer) {
				if already {
					fmt.Fprintf(w, "The %s %s was paused already, since %s by %s\n", scopeNoun(kind), p.Name, cliutil.FmtTimeP(&p.At), p.By)
					return
				}
				fmt.Fprintf(w, "Paused the %s %s\n", scopeNoun(kind), p.Name)
			})
		},
	}
	pf.Register(c.Flags())
	return c
}

func newScopeResumeCmd(a *cliutil.App, kind string) *cobra.Command {
	arg := "QUEUE"
	if kind == "type" {
		arg = "TYPE"
	}
	return &cobra.Command{
		Use:   "resume " + arg,
		Short: "Resume a paused " + scopeNoun(kind),
		Long: `Resume a paused ` + scopeNoun(kind) + `: its due runs are claimed at once (the
dispatchers are woken). Resuming one that is not paused fails (exit 1).`,
		Example: "  kagzi " + kindCmd(kind) + " resume " + exampleName(kind),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			if kind == "type" {
				err = cl.ResumeType(cmd.Context(), args[0])
			} else {
				err = cl.ResumeQueue(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			return a.Print(cmd, PausedJSON{Kind: kind, Name: args[0], Changed: true}, func(w io.Writer) {
				fmt.Fprintf(w, "Resumed the %s %s\n", scopeNoun(kind), args[0])
			})
		},
	}
}

func newScopePausedCmd(a *cliutil.App, kind string) *cobra.Command {
	return &cobra.Command{
		Use:     "paused",
		Short:   "List the namespace's paused " + scopeNoun(kind) + "s",
		Example: "  kagzi --json " + kindCmd(kind) + " paused",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			all, err := cl.ListPaused(cmd.Context())
			if err != nil {
				return err
			}
			out := []PausedJSON{}
			for _, p := range all {
				if p.Kind == kind {
					out = append(out, toPausedJSON(p, false))
				}
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintf(w, "No paused %ss.\n", scopeNoun(kind))
					return
				}
				fmt.Fprintln(w, "NAME\tPAUSED\tBY\tREASON")
				for _, p := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, cliutil.FmtTimeP(&p.At), cliutil.OrDash(p.By), cliutil.OrDash(p.Reason))
				}
			})
		},
	}
}

func kindCmd(kind string) string {
	if kind == "type" {
		return "workflow"
	}
	return "queue"
}

func exampleName(kind string) string {
	if kind == "type" {
		return "ProcessOrder"
	}
	return "orders"
}
