package core

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Settings are the database-wide settings in kagzi.settings: the one source
// of the payload limits. Every Store reads them once (the first time it
// checks a payload) and the dispatcher tells workers the limits with every
// delivery, so the client that starts a run, the worker that reports its
// steps and the store that records them apply the same numbers. A change
// takes effect in each process when it restarts.
type Settings struct {
	// PayloadWarnBytes: accepted payloads above it are reported to
	// Options.OnLargePayload (and logged by workers).
	PayloadWarnBytes int
	// PayloadMaxBytes: payloads above it are refused with
	// ErrPayloadTooLarge.
	PayloadMaxBytes int
}

// MaxPayloadLimit bounds Settings.PayloadMaxBytes: a payload travels whole
// in one report, so it must fit in a NATS message, and NATS servers allow
// at most 64 MiB.
const MaxPayloadLimit = 64 << 20

// Validate reports settings no database would accept.
func (s Settings) Validate() error {
	switch {
	case s.PayloadMaxBytes < 1 || s.PayloadMaxBytes > MaxPayloadLimit:
		return Invalidf("payload limit %d bytes: 1 to %d", s.PayloadMaxBytes, MaxPayloadLimit)
	case s.PayloadWarnBytes < 1 || s.PayloadWarnBytes > s.PayloadMaxBytes:
		return Invalidf("payload warning size %d bytes: 1 to the limit (%d)", s.PayloadWarnBytes, s.PayloadMaxBytes)
	}
	return nil
}

// SettingsCache holds a Store's copy of the settings; a Store and the
// Stores bound to transactions from it share one.
type SettingsCache struct {
	mu sync.Mutex
	v  *Settings
}

// Settings' statements, written in sql/settings.sql.
var (
	settingsGetSQL = stmt("SettingsGet")
	settingsSetSQL = stmt("SettingsSet")
)

// SettingsGet reads the settings from the database.
func (h *Handle) SettingsGet(ctx context.Context) (Settings, error) {
	var v Settings
	err := settingsGetSQL.QueryRowPos(ctx, h.DB).Scan(&v.PayloadWarnBytes, &v.PayloadMaxBytes)
	if err != nil {
		return Settings{}, MapErr("read settings", err)
	}
	return v, nil
}

// SettingsSet changes the settings (every field; see Settings.Validate) and
// returns them. This Store applies them at once; other processes when they
// restart.
func (h *Handle) SettingsSet(ctx context.Context, v Settings) (Settings, error) {
	if err := v.Validate(); err != nil {
		return Settings{}, err
	}
	_, err := settingsSetSQL.Exec(ctx, h.DB, pgx.NamedArgs{"warn_bytes": v.PayloadWarnBytes, "max_bytes": v.PayloadMaxBytes})
	if err != nil {
		return Settings{}, MapErr("set settings", err)
	}
	h.Settings.mu.Lock()
	h.Settings.v = &v
	h.Settings.mu.Unlock()
	return v, nil
}

// Limits returns the settings this Store applies, reading them from the
// database the first time.
func (h *Handle) Limits(ctx context.Context) (Settings, error) {
	c := h.Settings
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v != nil {
		return *c.v, nil
	}
	v, err := h.SettingsGet(ctx)
	if err != nil {
		return Settings{}, err
	}
	c.v = &v
	return v, nil
}

// checkPayload enforces the payload limits on one payload.
func (h *Handle) CheckPayload(ctx context.Context, what string, p []byte) error {
	n := len(p)
	if n == 0 {
		return nil
	}
	lim, err := h.Limits(ctx)
	if err != nil {
		return err
	}
	if n > lim.PayloadMaxBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, n, lim.PayloadMaxBytes)
	}
	if n > lim.PayloadWarnBytes && h.Opts.OnLargePayload != nil {
		h.Opts.OnLargePayload(what, n)
	}
	return nil
}
