package console_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHTTPAPIPageListsEveryRoute holds docs/http-api.md to the console's
// router: every "METHOD /api/v1/..." pattern the package registers (api.go,
// batches.go for the batch routes, events.go for the triggers') is a row of
// the page's table, and every row is a route.
func TestHTTPAPIPageListsEveryRoute(t *testing.T) {
	routes := map[string]bool{}
	for _, name := range []string{"api.go", "batches.go", "events.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			pattern, _ := strconv.Unquote(lit.Value)
			if _, path, _ := strings.Cut(pattern, " "); strings.HasPrefix(path, "/api/") {
				routes[pattern] = true
			}
			return true
		})
	}
	if len(routes) < 20 {
		t.Fatalf("found %d API routes; is the parser reading the router?", len(routes))
	}
	page, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z]+ /api/[^`]*)` \\|").FindAllStringSubmatch(string(page), -1) {
		rows[m[1]] = true
	}
	for r := range routes {
		if !rows[r] {
			t.Errorf("docs/http-api.md has no row for the route %q", r)
		}
	}
	for r := range rows {
		if !routes[r] {
			t.Errorf("docs/http-api.md lists %q, which the console's router does not serve", r)
		}
	}
}
