package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
)

// NewBatchCmd is `kagzi batch`: batch operations over many runs.
func NewBatchCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "batch",
		Aliases: []string{"batches"},
		Short:   "Act on many runs at once: cancel, terminate, signal, update, pause, resume, retry, fork, set or remove attributes, delete",
		Example: `  kagzi batch start cancel --query "type = 'ProcessOrder' AND customer = '42'" --rate 100
  kagzi batch list
  kagzi batch show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --runs failed`,
	})
	c.AddCommand(newBatchStartCmd(a), newBatchListCmd(a), newBatchShowCmd(a),
		newBatchStateCmd(a, "pause"), newBatchStateCmd(a, "resume"), newBatchStateCmd(a, "cancel"))
	return c
}

// BatchJSON is a batch as the batch commands print it: the client's JSON
// form, and the runs `batch show --runs` asked for.
type BatchJSON struct {
	client.BatchJSON
	Runs []client.BatchRunJSON `json:"runs,omitempty"`
}

func toBatchJSON(b client.Batch) BatchJSON { return BatchJSON{BatchJSON: client.NewBatchJSON(b)} }

func newBatchStartCmd(a *cliutil.App) *cobra.Command {
	var query, ids, event, update, payload string
	var attrs, attrNames []string
	var pf cliutil.PauseFlags
	var rate int
	c := &cobra.Command{
		Use:   "start ACTION (--query QUERY | --ids ID,...) [--rate N]",
		Short: "Start a batch: one action over the runs a query matches, or a list",
		Long: `Start a batch operation. ACTION is one of:
  cancel     ask each live run to cancel (as kagzi run cancel)
  terminate  end each live run at once, with --reason
  signal     send the event --event with --payload to each live run
  update     send the update --update with --payload to each live run, without
             waiting for its answer (each run's outcome names the update's
             id, whose answer the Go client's UpdateResult reads)
  pause      pause each live run, with --reason (as kagzi run pause)
  resume     resume each paused run
  retry      give each FAILED run a fresh start (as kagzi run retry)
  fork       fork each FAILED run from its failed step (as kagzi run fork-many
             --from-failed-step); a run forked from it before is skipped
  set-attributes
             set the search attributes --attr name=value on each run, live or
             finished (a value replaces the run's values of that name; repeat
             a keyword for a list)
  remove-attributes
             remove the search attributes --attr-name from each run, live or
             finished
  delete     delete each finished run with its steps, events and attributes,
             as retention does (a child whose parent has not finished is
             skipped)

The runs are fixed when the batch starts: those --query matches then (the
language of kagzi run list --query; live runs, FAILED ones for retry and
fork, finished ones for delete, any run for the attribute actions), or
those --ids lists (each must be a run the action takes). Attributes must
be declared (kagzi attribute declare), and their values fit their kinds. The reaper acts
on them at --rate runs per second (at most 10000), recording each run's
outcome with its action: a batch survives the reaper's restart and acts on
no run twice. A query matching more than 1,000,000 runs, or none, is
refused, and nothing starts.`,
		Example: `  kagzi batch start cancel --query "type = 'ProcessOrder' AND status = 'PENDING'"
  kagzi batch start signal --ids 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --event approve --payload '{"ok":true}'
  kagzi batch start retry --query "error_type = 'Timeout'" --rate 20
  kagzi batch start set-attributes --query "type = 'ProcessOrder' AND finished_at > '2026-11-01T00:00:00Z'" --attr incident=INC-7
  kagzi batch start remove-attributes --query "incident = 'INC-7'" --attr-name incident
  kagzi batch start delete --query "type = 'LoadTest' AND status = 'COMPLETED'"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.BatchOptions{Action: client.BatchAction(args[0]), Query: query, Reason: pf.Reason, By: pf.Who(), EventName: event + update, Rate: rate}
			if ids != "" {
				for s := range strings.SplitSeq(ids, ",") {
					id, err := cliutil.ParseID("run id", strings.TrimSpace(s))
					if err != nil {
						return err
					}
					o.RunIDs = append(o.RunIDs, id)
				}
			}
			if payload != "" {
				body, err := cliutil.ReadJSON(cmd, "payload", payload)
				if err != nil {
					return err
				}
				o.Payload = json.RawMessage(body)
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			if len(attrs) > 0 {
				declared, err := cl.ListAttributes(cmd.Context())
				if err != nil {
					return err
				}
				if o.Attributes, err = cliutil.ParseAttrFlags(a.Namespace, declared, attrs); err != nil {
					return err
				}
			}
			o.AttributeNames = attrNames
			b, err := cl.StartBatch(cmd.Context(), o)
			if err != nil {
				return err
			}
			return a.Print(cmd, toBatchJSON(b), func(w io.Writer) {
				fmt.Fprintf(w, "Started batch %s: %s %d runs at %d runs/s\n", b.ID, b.Action, b.Total, b.Rate)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&query, "query", "", "the runs to act on: a filter query (see kagzi run list --query)")
	f.StringVar(&ids, "ids", "", "the runs to act on: run ids, comma-separated (at most 10000)")
	f.IntVar(&rate, "rate", client.DefaultBatchRate, "most runs acted on per second (1 to 10000)")
	f.StringVar(&pf.Reason, "reason", "", "why: recorded with a terminate or a pause")
	f.StringVar(&pf.By, "by", "", "who starts the batch (default: the OS user, else \"cli\")")
	f.StringVar(&event, "event", "", "signal: the event's name")
	f.StringVar(&update, "update", "", "update: the update's name")
	f.StringVar(&payload, "payload", "", "signal, update: the event's payload or the update's request: JSON, @FILE, or - for stdin (default null)")
	f.StringArrayVar(&attrs, "attr", nil, "set-attributes: a search attribute name=value, parsed by its declared kind; repeat a keyword for a list")
	f.StringArrayVar(&attrNames, "attr-name", nil, "remove-attributes: the name of a search attribute to remove (repeatable)")
	c.MarkFlagsMutuallyExclusive("query", "ids")
	c.MarkFlagsMutuallyExclusive("attr", "attr-name")
	c.MarkFlagsMutuallyExclusive("event", "update")
	c.MarkFlagsOneRequired("query", "ids")
	return c
}

func newBatchListCmd(a *cliutil.App) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:     "list",
		Short:   "List the namespace's batches, newest first",
		Example: "  kagzi batch list --limit 10",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			bs, err := cl.ListBatches(cmd.Context(), limit)
			if err != nil {
				return err
			}
			out := make([]BatchJSON, len(bs))
			for i, b := range bs {
				out[i] = toBatchJSON(b)
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintln(w, "No batches.")
					return
				}
				fmt.Fprintln(w, "BATCH\tACTION\tSTATE\tDONE\tFAILED\tSKIPPED\tTOTAL\tRATE\tCREATED")
				for _, b := range bs {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d/s\t%s\n", b.ID, b.Action, b.State, b.Done, b.Failed, b.Skipped, b.Total, b.Rate,
						cliutil.FmtTime(b.CreatedAt))
				}
			})
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, "most batches to list (1 to 1000)")
	return c
}

func newBatchShowCmd(a *cliutil.App) *cobra.Command {
	var runs string
	var limit int
	c := &cobra.Command{
		Use:   "show BATCH_ID [--runs OUTCOME]",
		Short: "Show a batch's progress, and its runs with --runs",
		Long: `Show a batch: its action, query, state and counters. --runs lists its runs
with their outcomes: all, done, failed, skipped or pending (at most --limit).`,
		Example: "  kagzi batch show 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e --runs failed",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("batch id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			b, err := cl.GetBatch(cmd.Context(), id)
			if err != nil {
				return err
			}
			v := toBatchJSON(b)
			if runs != "" {
				outcome := runs
				if outcome == "all" {
					outcome = ""
				}
				rs, err := cl.BatchRuns(cmd.Context(), id, outcome, uuid.Nil, limit)
				if err != nil {
					return err
				}
				v.Runs = client.NewBatchRunsJSON(rs)
			}
			return a.Print(cmd, v, func(w io.Writer) {
				fmt.Fprintf(w, "Batch:\t%s\nAction:\t%s\nState:\t%s\n", b.ID, b.Action, b.State)
				if b.Query != "" {
					fmt.Fprintf(w, "Query:\t%s\n", b.Query)
				}
				if b.Reason != "" {
					fmt.Fprintf(w, "Reason:\t%s\n", b.Reason)
				}
				switch {
				case b.Action == client.BatchUpdate:
					fmt.Fprintf(w, "Update:\t%s %s\n", b.EventName, cliutil.FmtPayload(b.Payload))
				case b.EventName != "":
					fmt.Fprintf(w, "Event:\t%s %s\n", b.EventName, cliutil.FmtPayload(b.Payload))
				case b.Action == client.BatchSetAttributes || b.Action == client.BatchRemoveAttributes:
					fmt.Fprintf(w, "Attributes:\t%s\n", cliutil.FmtPayload(b.Payload))
				}
				fmt.Fprintf(w, "Runs:\t%d done, %d failed, %d skipped, %d pending of %d\nRate:\t%d runs/s\nCreated:\t%s by %s\n",
					b.Done, b.Failed, b.Skipped, b.Pending(), b.Total, b.Rate, cliutil.FmtTime(b.CreatedAt), cliutil.OrDash(b.CreatedBy))
				if b.FinishedAt != nil {
					fmt.Fprintf(w, "Finished:\t%s\n", cliutil.FmtTimeP(b.FinishedAt))
				}
				if runs != "" {
					fmt.Fprintln(w, "\nRUN\tOUTCOME\tDETAIL\tERROR")
					for _, r := range v.Runs {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.RunID, r.Outcome, cliutil.OrDash(r.Detail), cliutil.OrDash(cliutil.OneLine(r.Error, 120)))
					}
				}
			})
		},
	}
	c.Flags().StringVar(&runs, "runs", "", "list the batch's runs: all, done, failed, skipped or pending")
	c.Flags().IntVar(&limit, "limit", 100, "most runs --runs lists (1 to 1000)")
	return c
}

func newBatchStateCmd(a *cliutil.App, verb string) *cobra.Command {
	short := map[string]string{
		"pause":  "Pause a running batch after the runs it is acting on now",
		"resume": "Resume a paused batch",
		"cancel": "Cancel a batch: the runs it has not acted on are left as they are",
	}[verb]
	return &cobra.Command{
		Use:     verb + " BATCH_ID",
		Short:   short,
		Example: "  kagzi batch " + verb + " 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("batch id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			switch verb {
			case "pause":
				err = cl.PauseBatch(cmd.Context(), id)
			case "resume":
				err = cl.ResumeBatch(cmd.Context(), id)
			default:
				err = cl.CancelBatch(cmd.Context(), id)
			}
			if err != nil {
				return err
			}
			b, err := cl.GetBatch(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.Print(cmd, toBatchJSON(b), func(w io.Writer) {
				fmt.Fprintf(w, "Batch %s is %s: %d of %d runs acted on\n", id, b.State, b.Done+b.Failed+b.Skipped, b.Total)
			})
		},
	}
}
