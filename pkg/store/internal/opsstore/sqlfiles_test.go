package opsstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
