package ops

import (
	"fmt"
	"io"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/spf13/cobra"
)

func NewWorkflowCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "workflow",
		Aliases: []string{"workflows", "type", "types"},
		Short:   "Manage workflow types: their default versions, pause and resume",
		Example: `  kagzi workflow default-version ProcessOrder v2
  kagzi workflow pause ProcessOrder --reason "bad deploy"
  kagzi type resume ProcessOrder
  kagzi workflow default-version ProcessOrder --unset
  kagzi workflow default-version`,
	})
	c.AddCommand(newDefaultVersionCmd(a), newScopePauseCmd(a, "type"), newScopeResumeCmd(a, "type"), newScopePausedCmd(a, "type"))
	return c
}

// defaultVersionsJSON is what `workflow default-version` prints with --json.
type defaultVersionsJSON struct {
	Defaults []defaultVersionJSON `json:"defaults"`
}

type defaultVersionJSON struct {
	Type    string `json:"type"`
	Version string `json:"version"`
}

func newDefaultVersionCmd(a *cliutil.App) *cobra.Command {
	var unset bool
	c := &cobra.Command{
		Use:   "default-version [TYPE [VERSION]]",
		Short: "Show or set the version runs of a type get when started without one",
		Long: `With TYPE and VERSION, make VERSION the default version of workflow type
TYPE: runs started from now on without a version (by clients, schedules,
parents or continue-as-new) are pinned to it and delivered only to workers
that registered TYPE at VERSION. With --unset, remove it: such runs are
pinned again by the first worker that claims them. Without arguments, list
the namespace's default versions.`,
		Example: `  kagzi workflow default-version ProcessOrder v2
  kagzi workflow default-version ProcessOrder --unset
  kagzi --json workflow default-version`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			switch {
			case unset && len(args) == 1:
				if err := cl.RemoveDefaultVersion(ctx, args[0]); err != nil {
					return err
				}
				return a.Print(cmd, defaultVersionJSON{Type: args[0]}, func(w io.Writer) {
					fmt.Fprintf(w, "Workflow type %s has no default version.\n", args[0])
				})
			case unset:
				return cliutil.Usagef("--unset takes the workflow type only")
			case len(args) == 2:
				if err := cl.SetDefaultVersion(ctx, args[0], args[1]); err != nil {
					return err
				}
				return a.Print(cmd, defaultVersionJSON{Type: args[0], Version: args[1]}, func(w io.Writer) {
					fmt.Fprintf(w, "Workflow type %s: default version %s.\n", args[0], args[1])
				})
			case len(args) == 1:
				return cliutil.Usagef("give the version to set, or --unset")
			}
			ds, err := cl.DefaultVersions(ctx)
			if err != nil {
				return err
			}
			v := defaultVersionsJSON{Defaults: make([]defaultVersionJSON, len(ds))}
			for i, d := range ds {
				v.Defaults[i] = defaultVersionJSON{Type: d.Type, Version: d.Version}
			}
			return a.Print(cmd, v, func(w io.Writer) {
				if len(ds) == 0 {
					fmt.Fprintf(w, "No default versions in namespace %q.\n", a.Namespace)
					return
				}
				fmt.Fprintln(w, "TYPE\tDEFAULT VERSION")
				for _, d := range ds {
					fmt.Fprintf(w, "%s\t%s\n", d.Type, d.Version)
				}
			})
		},
	}
	c.Flags().BoolVar(&unset, "unset", false, "remove the type's default version")
	return c
}
