package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// Every named statement is taken by the code, and each by one variable:
// a block no code takes is dead SQL, one taken twice is prepared twice.
func TestSQLFilesUsed(t *testing.T) {
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]int{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok || len(c.Args) != 1 {
				return true
			}
			if id, ok := c.Fun.(*ast.Ident); !ok || id.Name != "stmt" {
				return true
			}
			if lit, ok := c.Args[0].(*ast.BasicLit); ok {
				name, _ := strconv.Unquote(lit.Value)
				taken[name]++
			} else {
				t.Errorf("%s: stmt takes a literal name, so this test can see it", p)
			}
			return true
		})
	}
	if len(sqlBlocks) == 0 {
		t.Fatal("no statement loaded from sql/")
	}
	for name, b := range sqlBlocks {
		switch taken[name] {
		case 0:
			t.Errorf("%s (%s) is taken by no code", name, b.File)
		case 1:
		default:
			t.Errorf("%s (%s) is taken %d times", name, b.File, taken[name])
		}
	}
	for name := range taken {
		if _, ok := sqlBlocks[name]; !ok {
			t.Errorf("stmt(%q): no such statement", name)
		}
	}
}

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
