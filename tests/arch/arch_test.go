package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/kagzi/kagzi"

// sqlExceptions are the files outside the data layer allowed SQL text,
// each with why.
var sqlExceptions = map[string]string{
	// The bench names the statements it sees in pg_stat_activity by their
	// beginnings; it executes none of them.
	"cmd/kagzi/internal/bench/measure/activity.go":      "patterns matched against pg_stat_activity",
	"cmd/kagzi/internal/bench/measure/activity_test.go": "pg_stat_activity rows for the classifier's test",
	"cmd/kagzi/internal/bench/scenarios_test.go":        "statement texts in the test of the tally's difference",
	// The bench's own measurements, which no service runs: they stay out
	// of the public data layer.
	"cmd/kagzi/internal/bench/measure/pgstats.go":      "server statistics (pg_stat_*), River's job count, the checks of its scenarios",
	"cmd/kagzi/internal/bench/measure/pgstats_test.go": "takes an advisory lock for the test of the bench's check of one",
	// The HA compose file's test replays, through psql, what the postgres
	// image runs at its first start, to show it does not wait for the
	// standby: the image's command, not Kagzi's.
	"deploy/compose_ha_pg_test.go": "the postgres image's first-start command, replayed through psql",
}

// sqlText matches a string that is a SQL statement: an upper-case
// statement keyword followed by what makes it one.
var sqlText = regexp.MustCompile(`^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\S+(\s+\S+)?\s+SET\s|DELETE\s+FROM\s|WITH\s+\w+(\s*\([^)]*\))?\s+AS\s|(CREATE|ALTER|DROP)\s+(TABLE|INDEX|DATABASE|ROLE|SCHEMA|TYPE|FUNCTION|TRIGGER|EXTENSION)\s|TRUNCATE\s|LISTEN\s|NOTIFY\s|UNLISTEN\s|GRANT\s|REVOKE\s|SET\s+(LOCAL\s+)?\w+\s*(=|TO)|BEGIN\b|COMMIT\b|ROLLBACK\b)`)

// natsCalls are the nats.Conn methods whose first argument is a subject.
var natsCalls = map[string]bool{
	"Publish": true, "PublishMsg": true, "PublishRequest": true, "Request": true, "RequestWithContext": true,
	"Subscribe": true, "SubscribeSync": true, "ChanSubscribe": true, "QueueSubscribe": true,
	"QueueSubscribeSync": true, "ChanQueueSubscribe": true, "QueueSubscribeSyncWithChan": true,
}

type file struct {
	rel  string // slash path from the repository root
	mod  string // slash path of its module's directory: "." for the root module
	test bool
	ast  *ast.File
	fset *token.FileSet
}

// files parses every Go file of the repository: the root module's and
// those of the nested modules (the CLI, the deploy tests, the console's
// browser tests), to which every rule applies alike.
func files(t *testing.T) []file {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	var out []file
	var mods []string // module directories, parents before children
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				rel, _ := filepath.Rel(root, path)
				mods = append(mods, filepath.ToSlash(rel))
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		mod := "."
		for _, m := range mods {
			if m != "." && under(rel, m) {
				mod = m // the innermost: WalkDir sees parents first
			}
		}
		out = append(out, file{rel: rel, mod: mod, test: strings.HasSuffix(path, "_test.go"), ast: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found %d Go files: not the module", len(out))
	}
	return out
}

func under(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// literals calls fn with every string literal of f with its position.
func literals(f file, fn func(pos token.Position, s string, call *ast.CallExpr)) {
	var calls []*ast.CallExpr
	ast.Inspect(f.ast, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		switch n := n.(type) {
		case *ast.ImportSpec:
			return false
		case *ast.CallExpr:
			calls = append(calls, n)
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			// The innermost call whose first argument this literal is.
			var call *ast.CallExpr
			for _, c := range calls {
				if len(c.Args) > 0 && c.Args[0] == ast.Expr(n) {
					call = c
				}
			}
			fn(f.fset.Position(n.Pos()), s, call)
		}
		return true
	})
}

// SQL is written in pkg/store only: elsewhere a query would bypass the
// store's params structs, its error mapping and its tests.
func TestSQLOnlyInTheDataLayer(t *testing.T) {
	for _, f := range files(t) {
		if under(f.rel, "pkg/store", "tests/arch") || sqlExceptions[f.rel] != "" {
			continue
		}
		literals(f, func(pos token.Position, s string, _ *ast.CallExpr) {
			if sqlText.MatchString(s) {
				t.Errorf("%s:%d: SQL outside pkg/store: %.60q", f.rel, pos.Line, s)
			}
		})
	}
}

// NATS subjects are built in pkg/protocol only, the wire contract:
// elsewhere a subject would drift from the one its peer uses. Tests of
// NATS plumbing may use subjects of their own, never Kagzi's.
func TestSubjectsOnlyInTheProtocol(t *testing.T) {
	for _, f := range files(t) {
		if under(f.rel, "pkg/protocol", "tests/arch") {
			continue
		}
		literals(f, func(pos token.Position, s string, call *ast.CallExpr) {
			if strings.HasPrefix(s, "kagzi.v1") {
				t.Errorf("%s:%d: Kagzi subject %q outside pkg/protocol", f.rel, pos.Line, s)
				return
			}
			if f.test || call == nil {
				return
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && natsCalls[sel.Sel.Name] {
				t.Errorf("%s:%d: subject literal %q passed to %s outside pkg/protocol", f.rel, pos.Line, s, sel.Sel.Name)
			}
		})
	}
}

// servicesImporters are the packages besides tests that may import a
// service (services/<name>): the binaries (cmd/<name>, the CLI and its
// bench, which runs services in process), the dev assembly that composes
// every service from the outside, and the console's test harness, which
// runs a worker service beside the console.
var servicesImporters = []string{"cmd", "tests/devserver", "pkg/console/internal/consoletest"}

// A service's code never imports another service, and no library imports
// a service: a service can change without breaking another's build, and
// what the services share lives in pkg/ and internal/. A service's
// system tests may run the other services, as a deployment does.
func TestServicesImportNoService(t *testing.T) {
	for _, f := range files(t) {
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			svc, ok := strings.CutPrefix(p, module+"/services/")
			if !ok {
				continue
			}
			own, inService := strings.CutPrefix(f.rel, "services/")
			switch {
			case inService && strings.SplitN(own, "/", 2)[0] == strings.SplitN(svc, "/", 2)[0]:
			case inService && !f.test:
				t.Errorf("%s imports %s: a service never imports another", f.rel, p)
			case !inService && !f.test && !under(f.rel, servicesImporters...):
				t.Errorf("%s imports %s: only the binaries and the dev assembly compose services", f.rel, p)
			}
		}
	}
}

// The checks above would pass vacuously if they saw nothing: each must
// catch what it is written for.
func TestChecksCatchViolations(t *testing.T) {
	for _, s := range []string{"SELECT run_id FROM kagzi.workflow_runs", "  INSERT INTO kagzi.x (a) VALUES ($1)", "UPDATE kagzi.workers w SET status = 'x'",
		"DELETE FROM kagzi.x", "WITH t AS (SELECT 1) SELECT * FROM t", "CREATE DATABASE x TEMPLATE y", "LISTEN kagzi_ready", "SET lock_timeout = '1s'"} {
		if !sqlText.MatchString(s) {
			t.Errorf("%q not taken for SQL", s)
		}
	}
	for _, s := range []string{"select a run", "Update the schedule", "SELECT", "delete", "with as"} {
		if sqlText.MatchString(s) {
			t.Errorf("%q taken for SQL", s)
		}
	}
	src := `package x
import "github.com/nats-io/nats.go"
func f(nc *nats.Conn) { nc.Publish("orders.new", nil); _ = "kagzi.v1.ready" }`
	fset := token.NewFileSet()
	a, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lits, inCall int
	literals(file{rel: "x.go", ast: a, fset: fset}, func(_ token.Position, s string, call *ast.CallExpr) {
		lits++
		if call != nil && s == "orders.new" {
			inCall++
		}
	})
	if lits != 2 || inCall != 1 {
		t.Errorf("literals: %d found, %d as a call's first argument; want 2 and 1", lits, inCall)
	}
}

// Each service binary (cmd/<name>) links only its own service: a change
// to one service's code does not rebuild, or risk, another's. The worker
// links no database driver and no data layer: workers talk NATS only.
func TestServiceBinariesLinkOnlyTheirService(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	services := []string{"dispatcher", "scheduler", "reaper", "worker"}
	for _, name := range services {
		out, err := exec.Command("go", "list", "-deps", "../../cmd/"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", name, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		if !deps[module+"/services/"+name] {
			t.Errorf("cmd/%s does not link services/%s: the check looks at the wrong thing", name, name)
		}
		for _, other := range services {
			if other != name && deps[module+"/services/"+other] {
				t.Errorf("cmd/%s links services/%s", name, other)
			}
		}
		for _, pkg := range []string{"tests/devserver", "tests/testflows", "tests/modeltest", "tests/chaos"} {
			if deps[module+"/"+pkg] {
				t.Errorf("cmd/%s links %s", name, pkg)
			}
		}
		if name != "worker" {
			continue
		}
		for d := range deps {
			if strings.HasPrefix(d, "github.com/jackc/") || d == module+"/pkg/store" {
				t.Errorf("cmd/worker links %s: workers need NATS only", d)
			}
		}
	}
}

// The tool-only modules (ToolModules) are imported from nested modules
// only, and the walk above reaches every nested module.
func TestToolModulesOnlyInNestedModules(t *testing.T) {
	fs := files(t)
	seen := map[string]int{}
	for _, f := range fs {
		seen[f.mod]++
		if f.mod != "." {
			continue
		}
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if IsToolModule(p) {
				t.Errorf("%s imports %s: only tools and tests need it, so it belongs in a nested module (%v)", f.rel, p, NestedModules)
			}
		}
	}
	for _, m := range NestedModules {
		if seen[m] == 0 {
			t.Errorf("no Go file of the nested module %s was checked", m)
		}
	}
	for m := range seen {
		if m != "." && !slices.Contains(NestedModules, m) {
			t.Errorf("nested module %s is not listed in NestedModules", m)
		}
	}
	for _, p := range []string{"github.com/spf13/cobra", "github.com/nats-io/nats-server/v2/server", "k8s.io/api/core/v1", "github.com/riverqueue/river/rivermigrate"} {
		if !IsToolModule(p) {
			t.Errorf("%s not taken for a tool-only module", p)
		}
	}
	for _, p := range []string{"github.com/nats-io/nats.go", "github.com/jackc/pgx/v5", "github.com/spf13/cobra-extra"} {
		if IsToolModule(p) {
			t.Errorf("%s taken for a tool-only module", p)
		}
	}
}

// internal/ holds the building blocks that pkg/ and services/ import, so
// nothing there may import upwards: no service, no rig under tests/.
// Outside tests/, only the binaries and the console's test harness
// (which runs a dev assembly beside the console) may import a rig.
func TestNothingImportsUpwards(t *testing.T) {
	for _, f := range files(t) {
		if f.test {
			continue
		}
		for _, imp := range f.ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			rig := strings.HasPrefix(rest, "tests/")
			switch {
			case under(f.rel, "internal") && (rig || strings.HasPrefix(rest, "services/")):
				t.Errorf("%s imports %s: internal/ imports neither services nor rigs", f.rel, p)
			case rig && under(f.rel, "pkg", "services") && !under(f.rel, "pkg/console/internal/consoletest"):
				t.Errorf("%s imports %s: a library or service never links a test rig", f.rel, p)
			}
		}
	}
}

// maxFileLines and maxPackageLines bound the non-test Go code of one file
// and of one package: a file past them holds more than one concern, a
// package more than one room.
const (
	maxFileLines    = 800
	maxPackageLines = 4000
)

// No non-test file is over maxFileLines lines and no package (a
// directory's non-test files) over maxPackageLines.
func TestFileAndPackageSizes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	perDir := map[string]int{}
	for _, f := range files(t) {
		if f.test {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.rel)))
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(src), "\n")
		if n > maxFileLines {
			t.Errorf("%s: %d lines, over %d", f.rel, n, maxFileLines)
		}
		perDir[filepath.ToSlash(filepath.Dir(f.rel))] += n
	}
	for dir, n := range perDir {
		if n > maxPackageLines {
			t.Errorf("package %s: %d lines, over %d", dir, n, maxPackageLines)
		}
	}
}
