package core

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestSQLFileParsing(t *testing.T) {
	good := "-- header\n\n-- name: RunsGet :one\nSELECT 1\nFROM x;\n\n-- name: RunsDrop :exec\nDELETE FROM x\n"
	m, err := LoadSQL(fstest.MapFS{"sql/a.sql": {Data: []byte(good)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := m["RunsGet"].Text; got != "SELECT 1\nFROM x" {
		t.Errorf("RunsGet = %q", got)
	}
	if got := m["RunsDrop"].Kind; got != "exec" {
		t.Errorf("RunsDrop kind = %q", got)
	}
	for name, src := range map[string]string{
		"kind":      "-- name: RunsGet :some\nSELECT 1\n",
		"empty":     "-- name: RunsGet :one\n\n-- name: RunsDrop :exec\nSELECT 1\n",
		"preamble":  "SELECT 1\n-- name: RunsGet :one\nSELECT 1\n",
		"malformed": "-- name: runsGet :one\nSELECT 1\n",
	} {
		if _, err := LoadSQL(fstest.MapFS{"sql/a.sql": {Data: []byte(src)}}); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	twice := fstest.MapFS{"sql/a.sql": {Data: []byte("-- name: RunsGet :one\nSELECT 1\n")}, "sql/b.sql": {Data: []byte("-- name: RunsGet :one\nSELECT 2\n")}}
	if _, err := LoadSQL(twice); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a name written twice: %v", err)
	}
}
