package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

// exportPage is how many runs one read of `run export` takes (one
// snapshot each).
const exportPage = 500

// exportJSON is one line of `run export`: a run with everything that
// belongs to it, as retention would delete it.
type exportJSON struct {
	Run    cliutil.RunJSON    `json:"run"`
	Steps  []cliutil.StepJSON `json:"steps"`
	Events []exportEventJSON  `json:"events"`
}

// exportEventJSON is an event sent to an exported run.
type exportEventJSON struct {
	EventID    uuid.UUID       `json:"event_id"`
	Name       string          `json:"name"`
	CreatedAt  time.Time       `json:"created_at"`
	ConsumedAt *time.Time      `json:"consumed_at,omitempty"`
	ConsumedBy string          `json:"consumed_by,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

func toExportJSON(rec store.RunRecord) exportJSON {
	out := exportJSON{Run: cliutil.ToRunJSON(rec.Run), Steps: make([]cliutil.StepJSON, len(rec.Steps)), Events: make([]exportEventJSON, len(rec.Events))}
	for i, s := range rec.Steps {
		out.Steps[i] = cliutil.ToStepJSON(s)
	}
	for i, e := range rec.Events {
		out.Events[i] = exportEventJSON{EventID: e.ID, Name: e.Name, CreatedAt: e.CreatedAt.UTC(), ConsumedAt: cliutil.UTC(e.ConsumedAt),
			ConsumedBy: e.ConsumedBy, Payload: cliutil.Payload(e.Payload)}
	}
	return out
}

func newRunExportCmd(a *cliutil.App) *cobra.Command {
	var (
		statuses                      []string
		typ, queue, before, outputArg string
	)
	c := &cobra.Command{
		Use:   "export",
		Short: "Write runs with their steps, payloads and events as JSON Lines",
		Long: `Write the namespace's runs, newest first, one JSON object per line: the
run (with its input and output), every attempt of its steps (with theirs)
and the events sent to it — everything retention deletes with a run, so an
archive of it can be kept. The filters are run list's, and
--finished-before takes only runs that finished before a time (RFC 3339) or
an age (6d: more than 6 days ago): with the retention periods (kagzi
retention show), what the reaper is about to delete. Each page of runs is
read from one snapshot, so a run the reaper deletes meanwhile is written
whole or not at all.

On a terminal, standard error shows a progress line (runs written of the
runs the filter selects, counted first, runs/s, ETA, time taken), redrawn at most 4 times a second, and a final one; none with
--json or when standard error is not a terminal (KAGZI_PROGRESS=1 shows it
anyway, 0 never).`,
		Example: `  kagzi run export --finished-before 6d --output archive.jsonl
  kagzi run export --status FAILED --type ProcessOrder > failed.jsonl
  kagzi run export --finished-before 2025-01-01T00:00:00Z | gzip > 2024.jsonl.gz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sts, err := cliutil.ParseStatuses(statuses)
			if err != nil {
				return err
			}
			p := store.RunsExportParams{Namespace: a.Namespace, Statuses: sts, Type: typ, Queue: queue, Limit: exportPage}
			if before != "" {
				at, err := parseBefore(before, time.Now())
				if err != nil {
					return err
				}
				p.FinishedBefore = &at
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			prog, err := a.Progress(cmd, "exporting runs", 0)
			if err != nil {
				return err
			}
			out, closeOut, err := openOutput(cmd, outputArg)
			if err != nil {
				return err
			}
			if prog != nil {
				// Only for the line (on a terminal): the total gives it an
				// ETA. Counted before the export's snapshot, so it may be a
				// few runs off.
				total, _, err := st.RunsCountQuery(cmd.Context(), p.Namespace, exportQuery(p), "")
				if err != nil {
					return err
				}
				prog.SetTotal(total)
			}
			prog.Start() // a page's read can take a while: the time moves meanwhile
			n, err := exportRuns(cmd, st, p, out, prog)
			prog.Done(int64(n))
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			where := "standard output"
			if outputArg != "" && outputArg != "-" {
				where = outputArg
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Exported %d run(s) to %s.\n", n, where)
			return nil
		},
	}
	f := c.Flags()
	f.StringSliceVar(&statuses, "status", nil, "only these statuses, comma-separated (e.g. COMPLETED,FAILED)")
	f.StringVar(&typ, "type", "", "only this workflow type")
	f.StringVar(&queue, "queue", "", "only this task queue")
	f.StringVar(&before, "finished-before", "", "only runs that finished before this time (RFC 3339) or more than this age ago (e.g. 6d)")
	f.StringVarP(&outputArg, "output", "o", "", "write to this file instead of standard output")
	return c
}

// exportRuns writes every page of p to w, counting each run on prog, and
// returns how many runs it wrote.
func exportRuns(cmd *cobra.Command, st *store.Store, p store.RunsExportParams, w io.Writer, prog *cliutil.Progress) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	for {
		recs, next, err := st.RunsExport(cmd.Context(), p)
		if err != nil {
			return n, err
		}
		for _, rec := range recs {
			if err := enc.Encode(toExportJSON(rec)); err != nil {
				return n, fmt.Errorf("write run %s: %w", rec.Run.ID, err)
			}
			n++
			prog.Add(1)
		}
		if next == nil {
			return n, bw.Flush()
		}
		p.After = next
	}
}

// exportQuery is p's filter in the query language, for the count that
// gives the progress line its total.
func exportQuery(p store.RunsExportParams) string {
	quote := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	var preds []string
	if len(p.Statuses) > 0 {
		qs := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			qs[i] = quote(string(s))
		}
		preds = append(preds, "status IN ("+strings.Join(qs, ", ")+")")
	}
	if p.Type != "" {
		preds = append(preds, "type = "+quote(p.Type))
	}
	if p.Queue != "" {
		preds = append(preds, "queue = "+quote(p.Queue))
	}
	if p.FinishedBefore != nil {
		preds = append(preds, "finished_at < "+quote(p.FinishedBefore.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(preds, " AND ")
}

// openOutput opens the --output file (standard output for "" or "-").
func openOutput(cmd *cobra.Command, path string) (io.Writer, func() error, error) {
	if path == "" || path == "-" {
		return cmd.OutOrStdout(), func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, cliutil.Usagef("--output %s: %v", path, err)
	}
	return f, f.Close, nil
}

// parseBefore reads --finished-before: an RFC 3339 time, or an age before
// now (6d, 36h, 1d12h).
func parseBefore(s string, now time.Time) (time.Time, error) {
	return cliutil.ParseWhen("finished-before", s, now)
}
