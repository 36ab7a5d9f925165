package config_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/configuration.md")

// referencePage is the page whose generated part reference writes.
const referencePage = "../../docs/configuration.md"

// The generated part of referencePage lies between these lines.
const (
	referenceBegin = "<!-- Generated from the configuration structs and the KAGZI_* paragraphs of their comments: go test ./internal/config -run TestConfigurationReference -update -->"
	referenceEnd   = "<!-- End of the generated reference. -->"
)

// component is one table of the reference: the variables its struct
// reads that no earlier table listed.
type component struct {
	title string
	cfg   any
}

// components are the configuration structs, in the order of the
// reference's tables; users names which of them read a variable.
var components = []component{
	{"Every process", config.Common{}},
	{"Database", config.Database{}},
	{"Dispatcher", dispatcher.Config{}},
	{"Scheduler", scheduler.Config{}},
	{"Reaper", reaper.Config{}},
	{"Worker", workersvc.Config{}},
	{"Console", config.Console{}},
}

// users are the components named in the "read by" column, in its order.
var users = []struct {
	name string
	cfg  any
}{
	{"dispatcher", dispatcher.Config{}},
	{"scheduler", scheduler.Config{}},
	{"reaper", reaper.Config{}},
	{"worker", workersvc.Config{}},
	{"console", config.Console{}},
}

// variable is one row of the reference.
type variable struct {
	name, def string
}

// structVars returns the variables of cfg's type in field order, embedded
// structs and the project's own struct fields followed, with the default
// of each env tag.
func structVars(t reflect.Type) []variable {
	var vars []variable
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if tag, ok := f.Tag.Lookup("env"); ok {
			name, rest, _ := strings.Cut(tag, ",")
			if name = strings.TrimSpace(name); name != "" {
				def := ""
				if _, d, ok := strings.Cut(rest, "default="); ok {
					def = d
				}
				vars = append(vars, variable{name, def})
				continue
			}
		}
		ft := f.Type
		if ft.Kind() == reflect.Struct && (f.Anonymous || strings.HasPrefix(ft.PkgPath(), "github.com/kagzi/kagzi/")) {
			vars = append(vars, structVars(ft)...)
		}
	}
	return vars
}

// varRE is the start of a variable's paragraph in a comment.
var varRE = regexp.MustCompile(`(?s)^(KAGZI_[A-Z0-9_]+): (.*)$`)

// paragraphs collects the "KAGZI_X: ..." paragraphs of every comment of
// the Go files (tests excluded) under dirs, one line each. A variable
// documented twice is an error.
func paragraphs(t *testing.T, dirs []string, files []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, file := range goFiles(t, dirs, files) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			for _, p := range strings.Split(cg.Text(), "\n\n") {
				m := varRE.FindStringSubmatch(strings.TrimSpace(p))
				if m == nil {
					continue
				}
				if _, dup := out[m[1]]; dup {
					t.Errorf("%s: %s is documented a second time; keep one paragraph", file, m[1])
				}
				out[m[1]] = strings.Join(strings.Fields(m[2]), " ")
			}
		}
	}
	return out
}

// goFiles lists the non-test Go files of files and under dirs.
func goFiles(t *testing.T, dirs []string, files []string) []string {
	t.Helper()
	out := append([]string(nil), files...)
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// cliDir is the CLI's source, a module of its own that this test reads
// as text.
const cliDir = "../../cmd/kagzi"

// cliVars returns the variables the CLI reads itself (a call whose first
// argument is the name, as envOr and os.Getenv take it, with envOr's
// literal default) and the names of the configuration structs of this
// package it loads (a variable declared of type config.T).
func cliVars(t *testing.T) (map[string]string, map[string]bool) {
	t.Helper()
	vars, structs := map[string]string{}, map[string]bool{}
	name := regexp.MustCompile(`^KAGZI_[A-Z0-9_]+$`)
	for _, file := range goFiles(t, []string{cliDir}, nil) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if len(n.Args) == 0 {
					return true
				}
				lit, ok := n.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, _ := strconv.Unquote(lit.Value)
				if !name.MatchString(v) {
					return true
				}
				def := vars[v]
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "envOr" && len(n.Args) == 2 {
					if d, ok := n.Args[1].(*ast.BasicLit); ok && d.Kind == token.STRING {
						def, _ = strconv.Unquote(d.Value)
					}
				}
				vars[v] = def
			case *ast.ValueSpec:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "config" {
						structs[sel.Sel.Name] = true
					}
				}
			}
			return true
		})
	}
	return vars, structs
}

// configStructs are the structs of this package the CLI may load, by name.
var configStructs = map[string]any{
	"Common": config.Common{}, "NATSAuth": config.NATSAuth{}, "Database": config.Database{},
	"Lease": config.Lease{}, "Console": config.Console{},
}

// reference renders the generated part of docs/configuration.md: a table
// per component, then the CLI's own variables, each row's meaning the
// variable's paragraph in the code.
func reference(t *testing.T) string {
	t.Helper()
	services, err := filepath.Glob("../../services/*/config.go")
	if err != nil {
		t.Fatal(err)
	}
	desc := paragraphs(t, []string{cliDir}, append([]string{"config.go", "nats.go", "../../pkg/worker/config.go"}, services...))

	readBy := map[string][]string{}
	for _, u := range users {
		for _, v := range structVars(reflect.TypeOf(u.cfg)) {
			if !contains(readBy[v.name], u.name) {
				readBy[v.name] = append(readBy[v.name], u.name)
			}
		}
	}
	cli, loaded := cliVars(t)
	for s := range loaded {
		cfg, ok := configStructs[s]
		if !ok {
			t.Errorf("the CLI loads config.%s, which this test does not know: add it to configStructs", s)
			continue
		}
		for _, v := range structVars(reflect.TypeOf(cfg)) {
			cli[v.name] = v.def
		}
	}
	for name := range cli {
		readBy[name] = append(readBy[name], "CLI")
	}

	var b strings.Builder
	listed := map[string]bool{}
	table := func(title string, vars []variable) {
		var rows []variable
		for _, v := range vars {
			if !listed[v.name] {
				listed[v.name] = true
				rows = append(rows, v)
			}
		}
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n| variable | default | read by | meaning |\n| --- | --- | --- | --- |\n", title)
		for _, v := range rows {
			d, ok := desc[v.name]
			if !ok {
				t.Errorf("%s has no paragraph \"%s: ...\" in the comment of its field (or beside the code that reads it)", v.name, v.name)
			}
			def := "unset"
			if v.def != "" {
				def = "`" + v.def + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.name, def, readers(readBy[v.name]), strings.ReplaceAll(d, "|", `\|`))
		}
	}
	for _, c := range components {
		table(c.title, structVars(reflect.TypeOf(c.cfg)))
	}
	var own []variable
	for name, def := range cli {
		own = append(own, variable{name, def})
	}
	sort.Slice(own, func(i, j int) bool { return own[i].name < own[j].name })
	table("CLI", own)
	for name := range desc {
		if !listed[name] {
			t.Errorf("%s is documented but no configuration struct or CLI code reads it", name)
		}
	}
	return referenceBegin + "\n" + b.String() + "\n" + referenceEnd
}

// readers is the "read by" cell: every service, when all read it.
func readers(r []string) string {
	n := 0
	for _, u := range users {
		if contains(r, u.name) {
			n++
		}
	}
	if n == len(users) {
		rest := []string{"every service"}
		if contains(r, "CLI") {
			rest = append(rest, "CLI")
		}
		return strings.Join(rest, ", ")
	}
	return strings.Join(r, ", ")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestConfigurationReference: docs/configuration.md's tables are what the
// configuration structs and their comments say. With -update it rewrites
// them.
func TestConfigurationReference(t *testing.T) {
	page, err := os.ReadFile(referencePage)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(page, []byte(referenceBegin))
	end := bytes.Index(page, []byte(referenceEnd))
	if at < 0 || end < at {
		t.Fatalf("%s lacks the lines that enclose the generated reference:\n%s\n%s", referencePage, referenceBegin, referenceEnd)
	}
	want := reference(t)
	got := string(page[at : end+len(referenceEnd)])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte(nil), page[:at]...), want...), page[end+len(referenceEnd):]...)
		if err := os.WriteFile(referencePage, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	line, g, w := firstDiff(got, want)
	t.Errorf("docs/configuration.md is not what the configuration structs say; run\n\tgo test ./internal/config -run TestConfigurationReference -update\n(or make docs) and commit it. First difference, at line %d of the generated part:\n got: %s\nwant: %s",
		line, g, w)
}

// firstDiff returns the first line where a and b differ, and both lines.
func firstDiff(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; ; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) {
			return i + 1, x, y
		}
	}
}

// Every variable a configuration struct declares (read from the source,
// so a struct no component embeds is caught too) is in the reference.
func TestEveryVariableIsInTheReference(t *testing.T) {
	ref := reference(t)
	for name := range envTags(t) {
		if !strings.Contains(ref, "| `"+name+"` |") {
			t.Errorf("%s is declared in a configuration struct but not in the reference (is its struct in components?)", name)
		}
	}
}
