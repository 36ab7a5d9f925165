package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// stateJSON is one state key of `run state`.
type stateJSON struct {
	Key        string          `json:"key"`
	Version    int             `json:"version"`
	Value      json.RawMessage `json:"value"`
	RecordedAt *time.Time      `json:"recorded_at,omitempty"`
}

func newRunStateCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "state RUN_ID [KEY]",
		Short: "Show a run's durable state: the latest value of each key",
		Long: `Show the latest value of each state key the run set (workflow.State.Set),
with its version (how many Sets of the key the run made). With KEY, print
that key's value alone, as JSON (with --json, the key, version and value);
a key the run never set fails (exit 1). The state can be read while the
run runs, and after it ended.`,
		Example: `  kagzi run state 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e
  kagzi run state 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e progress`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			cl, err := a.Client(cmd.Context(), false)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				raw, version, err := cl.StateGet(cmd.Context(), id, args[1])
				if err != nil {
					return err
				}
				if version == 0 {
					return fmt.Errorf("run %s never set state %q: %w", id, args[1], store.ErrNotFound)
				}
				return a.Print(cmd, stateJSON{Key: args[1], Version: version, Value: raw}, func(w io.Writer) {
					fmt.Fprintln(w, compactJSON(raw))
				})
			}
			values, err := cl.StateList(cmd.Context(), id)
			if err != nil {
				return err
			}
			out := make([]stateJSON, len(values))
			for i, v := range values {
				out[i] = stateJSON{Key: v.Key, Version: v.Version, Value: v.Value, RecordedAt: cliutil.UTC(v.RecordedAt)}
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(out) == 0 {
					fmt.Fprintf(w, "Run %s has set no state\n", id)
					return
				}
				fmt.Fprintln(w, "KEY\tVERSION\tRECORDED\tVALUE")
				for _, v := range out {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", v.Key, v.Version, cliutil.FmtTimeMS(v.RecordedAt), compactJSON(v.Value))
				}
			})
		},
	}
}

// streamEntryJSON is one line of `run stream --json`.
type streamEntryJSON struct {
	Index      int             `json:"index"`
	Value      json.RawMessage `json:"value"`
	RecordedAt *time.Time      `json:"recorded_at,omitempty"`
}

func newRunStreamCmd(a *cliutil.App) *cobra.Command {
	var from int
	var follow bool
	c := &cobra.Command{
		Use:   "stream RUN_ID NAME",
		Short: "Print a run's stream entries, one JSON value a line; --follow to wait for more",
		Long: `Print the entries of the run's stream NAME (workflow.Stream.Write) in order,
one JSON value per line (with --json, one object per line with the entry's
index, value and time). --from N starts at entry N (from 1). Without
--follow, it prints the entries recorded so far and exits. With --follow,
it waits for new entries by push (NATS) and prints each as it is recorded,
until the workflow closes the stream or the run ends.

A stream the run has not written to is not an error, since it may be
written later: with --follow the command waits for it and says so on
stderr, naming the streams the run did write; without --follow stderr
says the same and nothing is printed.`,
		Example: `  kagzi run stream 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e tokens --follow
  kagzi --json run stream 0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e tokens --from 10`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := cliutil.ParseID("run id", args[0])
			if err != nil {
				return err
			}
			if from < 0 {
				return cliutil.Usagef("--from %d: an entry index is 1 or more", from)
			}
			ctx := cmd.Context()
			cl, err := a.Client(ctx, follow)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			print := func(e client.StreamEntry) error {
				var err error
				if a.JSON {
					var b []byte
					b, err = json.Marshal(streamEntryJSON{Index: e.Index, Value: e.Value, RecordedAt: cliutil.UTC(e.RecordedAt)})
					if err == nil {
						_, err = fmt.Fprintf(out, "%s\n", b)
					}
				} else {
					_, err = fmt.Fprintln(out, compactJSON(e.Value))
				}
				return err
			}
			errOut := cmd.ErrOrStderr()
			if !follow {
				entries, _, err := cl.StreamEntries(ctx, id, args[1], from)
				if err != nil {
					return err
				}
				for _, e := range entries {
					if err := print(e); err != nil {
						return err
					}
				}
				if len(entries) == 0 {
					if written, others := streamWritten(ctx, cl, id, args[1]); !written {
						fmt.Fprintf(errOut, "Run %s has written nothing to stream %q (%s).\n", id, args[1], others)
					}
				}
				return nil
			}
			// The reader subscribes before the check below: an entry
			// written meanwhile is not missed.
			r := cl.ReadStreamRaw(ctx, id, args[1], from)
			defer r.Close()
			if written, others := streamWritten(ctx, cl, id, args[1]); !written {
				if run, err := cl.Get(ctx, id); err == nil && !run.Status.Terminal() {
					fmt.Fprintf(errOut, "Waiting for stream %q of run %s, which nothing has written to yet (%s); Ctrl-C stops.\n",
						args[1], id, others)
				} else if err == nil {
					fmt.Fprintf(errOut, "Run %s ended %s without writing to stream %q (%s).\n", id, run.Status, args[1], others)
				}
			}
			for {
				e, err := r.Next(ctx)
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if err := print(e); err != nil {
					return err
				}
			}
		},
	}
	c.Flags().IntVar(&from, "from", 1, "the first entry to print (entries are numbered from 1)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "wait for new entries until the stream is closed or the run ends")
	return c
}

// streamWritten reports whether the run wrote to stream name (an entry or
// its close) and, if not, names the streams it did write to: a mistyped
// name waits for ever with --follow, and the note shows the right one.
func streamWritten(ctx context.Context, cl *client.Client, id uuid.UUID, name string) (bool, string) {
	infos, err := cl.Streams(ctx, id)
	if err != nil {
		return true, "" // the read itself reports what went wrong
	}
	names := make([]string, 0, len(infos))
	for _, s := range infos {
		if s.Name == name {
			return true, ""
		}
		names = append(names, fmt.Sprintf("%q", s.Name))
	}
	if len(names) == 0 {
		return false, "it has written to no stream yet"
	}
	return false, "its streams: " + strings.Join(names, ", ")
}

// compactJSON is raw JSON on one line.
func compactJSON(raw json.RawMessage) string {
	var b []byte
	if c, err := json.Marshal(raw); err == nil {
		b = c
	} else {
		b = raw
	}
	return string(b)
}
