package store

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
		return invalidf("payload limit %d bytes: 1 to %d", s.PayloadMaxBytes, MaxPayloadLimit)
	case s.PayloadWarnBytes < 1 || s.PayloadWarnBytes > s.PayloadMaxBytes:
		return invalidf("payload warning size %d bytes: 1 to the limit (%d)", s.PayloadWarnBytes, s.PayloadMaxBytes)
	}
	return nil
}

// settingsCache holds a Store's copy of the settings; a Store and the
// Stores bound to transactions from it share one.
type settingsCache struct {
	mu sync.Mutex
	v  *Settings
}

// Settings' statements, written in sql/settings.sql.
var (
	settingsGetSQL = stmt("SettingsGet")
	settingsSetSQL = stmt("SettingsSet")
)

// SettingsGet reads the settings from the database.
func (s *Store) SettingsGet(ctx context.Context) (Settings, error) {
	var v Settings
	err := settingsGetSQL.queryRowPos(ctx, s.db).Scan(&v.PayloadWarnBytes, &v.PayloadMaxBytes)
	if err != nil {
		return Settings{}, mapErr("read settings", err)
	}
	return v, nil
}

// SettingsSet changes the settings (every field; see Settings.Validate) and
// returns them. This Store applies them at once; other processes when they
// restart.
func (s *Store) SettingsSet(ctx context.Context, v Settings) (Settings, error) {
	if err := v.Validate(); err != nil {
		return Settings{}, err
	}
	_, err := settingsSetSQL.exec(ctx, s.db, pgx.NamedArgs{"warn_bytes": v.PayloadWarnBytes, "max_bytes": v.PayloadMaxBytes})
	if err != nil {
		return Settings{}, mapErr("set settings", err)
	}
	s.settings.mu.Lock()
	s.settings.v = &v
	s.settings.mu.Unlock()
	return v, nil
}

// Limits returns the settings this Store applies, reading them from the
// database the first time.
func (s *Store) Limits(ctx context.Context) (Settings, error) {
	c := s.settings
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v != nil {
		return *c.v, nil
	}
	v, err := s.SettingsGet(ctx)
	if err != nil {
		return Settings{}, err
	}
	c.v = &v
	return v, nil
}

// checkPayload enforces the payload limits on one payload.
func (s *Store) checkPayload(ctx context.Context, what string, p []byte) error {
	n := len(p)
	if n == 0 {
		return nil
	}
	lim, err := s.Limits(ctx)
	if err != nil {
		return err
	}
	if n > lim.PayloadMaxBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, n, lim.PayloadMaxBytes)
	}
	if n > lim.PayloadWarnBytes && s.opts.OnLargePayload != nil {
		s.opts.OnLargePayload(what, n)
	}
	return nil
}
