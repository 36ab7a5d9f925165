package ops

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

func NewWorkerCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "worker",
		Aliases: []string{"workers"},
		Short:   "Inspect registered workers and drain them",
		Example: `  kagzi worker list --status ONLINE
  kagzi worker drain 0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b`,
	})
	c.AddCommand(newWorkerListCmd(a), newWorkerDrainCmd(a))
	return c
}

func newWorkerDrainCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "drain WORKER_ID",
		Short: "Ask a worker to drain: finish or release its runs and deregister",
		Long: `Mark a worker DRAINING and tell it over NATS to drain as its own shutdown
does: it takes no new runs, lets those it holds finish for up to its drain
timeout, releases the rest to other workers, and deregisters. Draining a
DRAINING worker tells it again; an OFFLINE worker is a conflict.`,
		Example: `  kagzi worker drain 0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("worker id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), true)
			if err != nil {
				return err
			}
			w, err := cl.DrainWorker(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.Print(cmd, map[string]any{"worker_id": w.ID, "status": w.Status}, func(out io.Writer) {
				fmt.Fprintf(out, "Worker %s is %s.\n", w.ID, w.Status)
			})
		},
	}
}

// WorkersJSON is what `worker list` prints with --json.
type WorkersJSON struct {
	Workers []WorkerJSON `json:"workers"`
}

func newWorkerListCmd(a *cliutil.App) *cobra.Command {
	var queue, status string
	c := &cobra.Command{
		Use:   "list",
		Short: "List workers by queue, oldest registration first",
		Long: `List the namespace's workers: id, queue, host and pid, version, status
(ONLINE, DRAINING, OFFLINE), last heartbeat, slots and registered types.`,
		Example: `  kagzi worker list
  kagzi worker list --queue orders --status online
  kagzi --json worker list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws := store.WorkerStatus(strings.ToUpper(strings.TrimSpace(status)))
			if ws != "" && !ws.Valid() {
				return cliutil.Usagef("--status %q is not a worker status; use ONLINE, DRAINING or OFFLINE", status)
			}
			if queue != "" {
				if err := protocol.ValidToken("--queue", queue); err != nil {
					return cliutil.Usagef("%v", err)
				}
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			workers, err := st.WorkersList(cmd.Context(), store.WorkersListParams{Namespace: a.Namespace, Queue: queue, Status: ws})
			if err != nil {
				return err
			}
			v := WorkersJSON{Workers: make([]WorkerJSON, len(workers))}
			for i, w := range workers {
				v.Workers[i] = toWorkerJSON(w)
			}
			return a.Print(cmd, v, func(w io.Writer) {
				if len(workers) == 0 {
					fmt.Fprintf(w, "No workers in namespace %q.\n", a.Namespace)
					return
				}
				fmt.Fprintln(w, "WORKER ID\tQUEUE\tHOST\tPID\tVERSION\tSTATUS\tLAST HEARTBEAT\tSLOTS\tTYPES")
				for _, wk := range workers {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", wk.ID, wk.Queue, cliutil.OrDash(wk.Hostname), wk.PID,
						cliutil.OrDash(wk.Version), wk.Status, cliutil.Ago(wk.LastHeartbeatAt), wk.MaxConcurrency, typesList(wk.Types))
				}
			})
		},
	}
	c.Flags().StringVar(&queue, "queue", "", "only this task queue")
	c.Flags().StringVar(&status, "status", "", "only this status: ONLINE, DRAINING or OFFLINE")
	return c
}

func typesList(ts []store.TypeVersion) string {
	if len(ts) == 0 {
		return "-"
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Type
		if t.Version != "" {
			out[i] += "@" + t.Version
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
