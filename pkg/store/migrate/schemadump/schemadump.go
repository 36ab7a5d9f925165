// Package schemadump writes out the schema a database's migrations made,
// as migrations/schema.sql shows it: pg_dump's schema-only dump of schema
// kagzi, without what changes from one dump to the next (pg_dump's
// version, session settings, its restrict key, ownership and grants).
package schemadump

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Header opens schema.sql.
const Header = `-- The schema kagzi of a database migrated from empty: tables, indexes,
-- functions and triggers as the migrations leave them. Generated; do not
-- edit. Regenerate it with ` + "`make schema`" + ` (or ` + "`go generate ./migrations`" + `).
`

// Dump returns the normalised schema of the database at url, Header
// first. It runs pg_dump, which must be on PATH and at least as new as
// the server.
func Dump(ctx context.Context, url string) (string, error) {
	cmd := exec.CommandContext(ctx, "pg_dump", "--schema-only", "--schema=kagzi", "--no-owner", "--no-privileges", "--dbname="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pg_dump: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return Header + Normalise(string(out)), nil
}

// Normalise strips from a pg_dump dump what varies between dumps of one
// schema: pg_dump's banner and version lines, the session settings it
// starts with, the random key of its \restrict lines, and runs of blank
// lines.
func Normalise(dump string) string {
	var b strings.Builder
	blank := true
	for line := range strings.Lines(dump) {
		l := strings.TrimRight(line, "\r\n")
		switch {
		case l == "--",
			strings.HasPrefix(l, "-- PostgreSQL database dump"),
			strings.HasPrefix(l, "-- Dumped "),
			strings.HasPrefix(l, `\restrict `), strings.HasPrefix(l, `\unrestrict `),
			strings.HasPrefix(l, "SET "),
			strings.HasPrefix(l, "SELECT pg_catalog.set_config("):
			continue
		case strings.TrimSpace(l) == "":
			if blank {
				continue
			}
			blank = true
		default:
			blank = false
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return "\n" + strings.TrimSpace(b.String()) + "\n"
}
