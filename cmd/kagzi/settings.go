package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func init() { register(newSettingsCmd) }

// settingsJSON is what the settings commands print.
type settingsJSON struct {
	PayloadWarnBytes int `json:"payload_warn_bytes"`
	PayloadMaxBytes  int `json:"payload_max_bytes"`
}

func newSettingsCmd(a *cliutil.App) *cobra.Command {
	c := &cobra.Command{
		Use:   "settings",
		Short: "Show or change the database-wide settings (payload limits)",
		Long: `The payload limits (run inputs and outputs, step outputs, event payloads)
are settings of the database: the client, the dispatcher, the scheduler and
(told by the dispatcher with every delivery) the workers all apply the same
ones. A change takes effect in each process when it restarts. kagzi migrate
also applies KAGZI_PAYLOAD_WARN_BYTES and KAGZI_PAYLOAD_MAX_BYTES when they
are set.`,
		Example: `  kagzi settings
  kagzi settings set --payload-max-bytes 4194304 --payload-warn-bytes 1048576`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			v, err := st.SettingsGet(cmd.Context())
			if err != nil {
				return err
			}
			return a.Print(cmd, settingsJSON(v), printSettings(v))
		},
	}
	c.AddCommand(newSettingsSetCmd(a))
	return c
}

func printSettings(v store.Settings) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "payload warning size\t%d bytes\npayload limit\t%d bytes\n", v.PayloadWarnBytes, v.PayloadMaxBytes)
	}
}

func newSettingsSetCmd(a *cliutil.App) *cobra.Command {
	var warn, max int
	c := &cobra.Command{
		Use:   "set",
		Short: "Change the payload limits",
		Long: `Change the payload warning size and limit, in bytes (a flag not given keeps
its value). Payloads above the limit are refused with a clear error at
every edge; workers learn the new limit from their next delivery once the
dispatchers restart.`,
		Example: `  kagzi settings set --payload-max-bytes 4194304`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			v, err := applySettings(cmd.Context(), st, warn, max)
			if err != nil {
				return err
			}
			return a.Print(cmd, settingsJSON(v), printSettings(v))
		},
	}
	c.Flags().IntVar(&warn, "payload-warn-bytes", 0, "payloads above this size are logged")
	c.Flags().IntVar(&max, "payload-max-bytes", 0, "payloads above this size are refused")
	return c
}

// applySettings changes the fields given (positive) and keeps the others.
func applySettings(ctx context.Context, st *store.Store, warn, max int) (store.Settings, error) {
	v, err := st.SettingsGet(ctx)
	if err != nil {
		return store.Settings{}, err
	}
	if warn > 0 {
		v.PayloadWarnBytes = warn
	}
	if max > 0 {
		v.PayloadMaxBytes = max
	}
	return st.SettingsSet(ctx, v)
}

// settingsFromEnv reads KAGZI_PAYLOAD_WARN_BYTES and KAGZI_PAYLOAD_MAX_BYTES
// (0 when unset).
//
// KAGZI_PAYLOAD_WARN_BYTES: read by `kagzi migrate`; when set, written to
// the database's settings (database default `1048576`): payloads above it
// are logged
//
// KAGZI_PAYLOAD_MAX_BYTES: read by `kagzi migrate`; when set, written to
// the database's settings (database default `2097152`): payloads above it
// are refused
func settingsFromEnv() (warn, max int, err error) {
	parse := func(name, s string) (int, error) {
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, cliutil.Usagef("%s %q must be a positive number of bytes", name, s)
		}
		return n, nil
	}
	w, _ := os.LookupEnv("KAGZI_PAYLOAD_WARN_BYTES")
	m, _ := os.LookupEnv("KAGZI_PAYLOAD_MAX_BYTES")
	if warn, err = parse("KAGZI_PAYLOAD_WARN_BYTES", w); err != nil {
		return 0, 0, err
	}
	max, err = parse("KAGZI_PAYLOAD_MAX_BYTES", m)
	return warn, max, err
}
