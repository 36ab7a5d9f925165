package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
)

// flowFlags are `kagzi run start`'s flow control flags: debounce and id
// reuse policy (docs/flow-control.md).
type flowFlags struct {
	debounceKey, debounceKeep, idReuse string
	debounce, debounceMaxWait          time.Duration
	idReuseWindow                      time.Duration
}

func (ff *flowFlags) register(f *pflag.FlagSet) {
	f.StringVar(&ff.debounceKey, "debounce-key", "", "merge starts of the type with this key, within --debounce of each other, into one run")
	cliutil.DurationVar(f, &ff.debounce, "debounce", 0, client.MaxDebounceWindow, "with --debounce-key, the quiet time after the last start before the run executes, e.g. 5s")
	f.StringVar(&ff.debounceKeep, "debounce-keep", "last", "with --debounce-key, the input the run keeps: first or last")
	cliutil.DurationVar(f, &ff.debounceMaxWait, "debounce-max-wait", 0, client.MaxDebounceWait, "with --debounce-key, execute at most this long after the first start (0: no cap)")
	f.StringVar(&ff.idReuse, "id-reuse", "allow", "with --id, whether the id may name a new run after one that ended: allow, failed-only, reject, or terminate (end the live run and start anew)")
	cliutil.DurationVar(f, &ff.idReuseWindow, "id-reuse-window", 0, client.MaxIDReuseWindow, "with --id-reuse failed-only or reject, only runs that ended within this duration count (0: every run kept)")
}

// apply puts the flags on opts.
func (ff *flowFlags) apply(f *pflag.FlagSet, opts *client.StartOptions) error {
	if ff.debounceKey != "" {
		if ff.debounce <= 0 {
			return cliutil.Usagef("--debounce-key needs a positive --debounce window, e.g. --debounce 5s")
		}
		d := &client.Debounce{Key: ff.debounceKey, Window: ff.debounce, MaxWait: ff.debounceMaxWait}
		switch ff.debounceKeep {
		case "last":
		case "first":
			d.Keep = client.DebounceFirst
		default:
			return cliutil.Usagef("--debounce-keep %q is not first or last", ff.debounceKeep)
		}
		opts.Debounce = d
	} else {
		for _, name := range []string{"debounce", "debounce-keep", "debounce-max-wait"} {
			if f.Changed(name) {
				return cliutil.Usagef("--%s goes with --debounce-key", name)
			}
		}
	}
	pol, err := client.ParseIDReusePolicy(ff.idReuse)
	if err != nil {
		return cliutil.Usagef("--id-reuse %q is not allow, failed-only, reject or terminate", ff.idReuse)
	}
	if pol != client.AllowDuplicate && opts.ExternalID == "" {
		return cliutil.Usagef("--id-reuse %s needs an external id (--id)", ff.idReuse)
	}
	opts.IDReusePolicy, opts.IDReuseWindow = pol, ff.idReuseWindow
	return nil
}
