package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// sqlPackages are the store's packages that keep statements in sql/*.sql
// and take them with stmt.
var sqlPackages = []string{".", "internal/core", "internal/runstore", "internal/opsstore", "internal/schedstore", "internal/tokenstore", "internal/startbatch"}

// In each package, every named statement is taken by the code, and each by
// one variable: a block no code takes is dead SQL, one taken twice is
// prepared twice, and stmt of a name without a block would panic.
func TestSQLFilesUsed(t *testing.T) {
	dirs, err := filepath.Glob("internal/*/sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if pkg := filepath.ToSlash(filepath.Dir(d)); !slices.Contains(sqlPackages, pkg) {
			t.Errorf("%s keeps statements but is not in sqlPackages", pkg)
		}
	}
	for _, dir := range sqlPackages {
		t.Run(dir, func(t *testing.T) {
			blocks, err := core.LoadSQL(os.DirFS(dir))
			if err != nil {
				t.Fatal(err)
			}
			if len(blocks) == 0 {
				t.Fatal("no statement loaded from sql/")
			}
			taken := stmtNames(t, dir)
			for name, b := range blocks {
				switch taken[name] {
				case 0:
					t.Errorf("%s (%s) is taken by no code", name, b.File)
				case 1:
				default:
					t.Errorf("%s (%s) is taken %d times", name, b.File, taken[name])
				}
			}
			for name := range taken {
				if _, ok := blocks[name]; !ok {
					t.Errorf("stmt(%q): no such statement", name)
				}
			}
		})
	}
}

// stmtNames counts the names the non-test files of dir give stmt.
func stmtNames(t *testing.T, dir string) map[string]int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
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
	return taken
}
