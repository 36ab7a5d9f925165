package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

// The CLI's argument parsers, fuzzed: a rejected argument is a usage
// error (exit 2) that names what was wrong, and an accepted one is exactly
// what the documentation says it accepts.

// isUsage reports whether err is a usage error that exits 2.
func isUsage(err error) bool {
	var u *cliutil.UsageError
	return errors.As(err, &u) && exitCode(err) == cliutil.ExitUsage
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e", "0190C5F2-7A4E-7B1C-9D1E-2F3A4B5C6D7E",
		"{0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e}", "urn:uuid:0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e",
		"0190c5f27a4e7b1c9d1e2f3a4b5c6d7e", "00000000-0000-0000-0000-000000000000",
		"", "order-42", "0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7", "0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e ",
		"0190c5f2+7a4e-7b1c-9d1e-2f3a4b5c6d7e", "0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7g", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := cliutil.ParseID("run id", s)
		if err != nil {
			if !isUsage(err) || id != uuid.Nil || !strings.Contains(err.Error(), "run id") {
				t.Fatalf("cliutil.ParseID(%q) = %v, %v: want a usage error naming the argument", s, id, err)
			}
			return
		}
		// Whatever spelling was accepted, it names the id printed back.
		canon := id.String()
		hex := strings.ReplaceAll(canon, "-", "")
		flat := strings.NewReplacer("-", "", "{", "", "}", "", "urn:uuid:", "").Replace(strings.ToLower(s))
		if flat != hex {
			t.Fatalf("cliutil.ParseID(%q) = %s", s, canon)
		}
		if again, err := cliutil.ParseID("run id", canon); err != nil || again != id {
			t.Fatalf("cliutil.ParseID(%q) = %v, %v after cliutil.ParseID(%q) = %v", canon, again, err, s, id)
		}
	})
}

var allStatuses = []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusSleeping, store.StatusCompleted,
	store.StatusFailed, store.StatusCancelled, store.StatusScheduled, store.StatusPaused}

func FuzzParseStatuses(f *testing.F) {
	for _, s := range []string{"", "failed", "FAILED,pending", " Running , sleeping ", "completed,,cancelled",
		"scheduled,paused", "done", "FAILED,nope", ",", " ", "pendıng", "ſcheduled", "PAUSED\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		// --status is a string slice: comma-separated, repeatable.
		items := strings.Split(list, ",")
		got, err := cliutil.ParseStatuses(items)
		var want []store.RunStatus
		unknown := ""
		for _, it := range items {
			it = strings.TrimSpace(it)
			if it == "" {
				continue
			}
			// Case-insensitive as upper-casing reads it, so "pendıng" with a
			// dotless i is PENDING too.
			var match store.RunStatus
			for _, st := range allStatuses {
				if strings.ToUpper(it) == string(st) {
					match = st
				}
			}
			if match == "" && unknown == "" {
				unknown = it
			}
			want = append(want, match)
		}
		if err != nil {
			if !isUsage(err) || got != nil || unknown == "" || !strings.Contains(err.Error(), fmt.Sprintf("%q", unknown)) {
				t.Fatalf("cliutil.ParseStatuses(%q) = %v, %v: want a usage error naming %q", items, got, err, unknown)
			}
			return
		}
		if unknown != "" {
			t.Fatalf("cliutil.ParseStatuses(%q) = %v, accepting %q", items, got, unknown)
		}
		if len(got) != len(want) {
			t.Fatalf("cliutil.ParseStatuses(%q) = %v, want %v", items, got, want)
		}
		for i := range got {
			if got[i] != want[i] || !got[i].Valid() {
				t.Fatalf("cliutil.ParseStatuses(%q) = %v, want %v", items, got, want)
			}
		}
	})
}

func FuzzReadJSON(f *testing.F) {
	for _, c := range [][2]string{
		{"", ""}, {`{"order_id": 42}`, ""}, {"null", ""}, {" [1, 2.5e3, \"\\u2028\"] ", ""}, {"-", `{"a": 1}`},
		{"-", ""}, {"-", "{"}, {"{", ""}, {"{'a': 1}", ""}, {`{"a": 1}}`, ""}, {"NaN", ""}, {"\xff", ""},
		{`"\ud800"`, ""}, {"\ufeffnull", ""}, {"1 2", ""}, {"- ", ""},
	} {
		f.Add(c[0], []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, v string, stdin []byte) {
		if strings.HasPrefix(v, "@") {
			return // reads a file: not an input to fuzz
		}
		cmd := &cobra.Command{}
		cmd.SetIn(bytes.NewReader(stdin))
		got, err := cliutil.ReadJSON(cmd, "input", v)
		src := []byte(v)
		if v == "-" {
			src = stdin
		}
		switch {
		case v == "":
			if got != nil || err != nil {
				t.Fatalf("cliutil.ReadJSON(\"\") = %q, %v: want absent", got, err)
			}
		case json.Valid(src):
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("cliutil.ReadJSON(%q) = %q, %v: want the JSON as given", v, got, err)
			}
		default:
			if got != nil || !isUsage(err) || !strings.Contains(err.Error(), "--input") {
				t.Fatalf("cliutil.ReadJSON(%q) = %q, %v: want a usage error naming --input", v, got, err)
			}
		}
	})
}
