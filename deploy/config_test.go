// Package deploy_test validates the deployment files (Dockerfile,
// .dockerignore, deploy/compose.yaml and its HA override, deploy/k8s) by
// parsing them: no Docker engine, cluster or network is needed. Where the
// host has them it also runs what can run without Docker: nats-servers
// from the HA cluster's configuration, the HA Postgres pair from the host's
// PostgreSQL (as root), and kubectl kustomize on the HA overlay.
package deploy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"

	"github.com/kagzi/kagzi/internal/config"
)

// repoRoot is the repository root, relative to this package's directory.
const repoRoot = ".."

// processVar describes one environment variable a process reads.
type processVar struct {
	Default string // from the struct tag's default=, "" if none
}

// serviceConfigs maps each service binary to its configuration struct
// (services/<name>/config.go): the variables a deployment may set for it
// are exactly that struct's env tags.
var serviceConfigs = map[string]reflect.Type{
	"dispatcher": reflect.TypeFor[dispatcher.Config](),
	"scheduler":  reflect.TypeFor[scheduler.Config](),
	"reaper":     reflect.TypeFor[reaper.Config](),
	"worker":     reflect.TypeFor[workersvc.Config](),
}

// databaseServices are the services that use Postgres (and so get
// KAGZI_DATABASE_URL); the worker is not one of them.
var databaseServices = []string{"dispatcher", "scheduler", "reaper"}

// processVars returns the KAGZI_* variables each binary of the image
// reads: the services' config structs, and for the CLI (kagzi) the
// variables cmd/kagzi looks up.
func processVars(t *testing.T) map[string]map[string]processVar {
	t.Helper()
	out := map[string]map[string]processVar{}
	for name, typ := range serviceConfigs {
		vars := map[string]processVar{}
		structVars(t, typ, vars)
		if len(vars) == 0 {
			t.Fatalf("config struct %v of %s has no env tags", typ, name)
		}
		out[name] = vars
	}
	out["kagzi"] = cliVars(t)
	return out
}

// structVars collects the env tags of typ, descending into embedded and
// nested structs of package config (Common, Database).
func structVars(t *testing.T, typ reflect.Type, vars map[string]processVar) {
	t.Helper()
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, ok := f.Tag.Lookup("env")
		if !ok {
			// Embedded groups of variables (config.Common, config.Database)
			// are the project's own structs; a field of another module's
			// type is not configuration.
			if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.PkgPath(), "github.com/kagzi/kagzi/") {
				structVars(t, f.Type, vars)
			}
			continue
		}
		parts := strings.Split(tag, ",")
		name := strings.TrimSpace(parts[0])
		if name == "" {
			if tag == ",noinit" {
				continue // a field no variable sets, left nil
			}
			t.Fatalf("%v.%s: env tag %q without a variable name", typ, f.Name, tag)
		}
		var v processVar
		for _, p := range parts[1:] {
			if d, ok := strings.CutPrefix(strings.TrimSpace(p), "default="); ok {
				v.Default = d
			}
		}
		vars[name] = v
	}
}

var cliEnvRE = regexp.MustCompile(`(?:envOr|Getenv|LookupEnv)\("(KAGZI_[A-Z0-9_]+)"`)

// cliVars returns the KAGZI_* variables cmd/kagzi reads for its global
// flags (the CLI has no config struct: it looks them up by name).
func cliVars(t *testing.T) map[string]processVar {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "cmd", "kagzi", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]processVar{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cliEnvRE.FindAllStringSubmatch(string(src), -1) {
			vars[m[1]] = processVar{}
		}
	}
	// The CLI loads the NATS credentials and TLS settings with the
	// services' struct (config.NATSAuth).
	structVars(t, reflect.TypeOf(config.NATSAuth{}), vars)
	// `kagzi console` reads its own struct.
	structVars(t, reflect.TypeFor[config.Console](), vars)
	for _, want := range []string{"KAGZI_DATABASE_URL", "KAGZI_NATS_URL"} {
		if _, ok := vars[want]; !ok {
			t.Fatalf("cmd/kagzi does not read %s (found %v): update this test", want, keys(vars))
		}
	}
	return vars
}

// checkEnv reports the variables of env (names) that process does not
// read. KAGZI_* must be one of the process's variables; OTEL_* are the
// OpenTelemetry SDK's standard variables; anything else is rejected.
func checkEnv(t *testing.T, where, process string, names []string, vars map[string]map[string]processVar) {
	t.Helper()
	known, ok := vars[process]
	if !ok {
		t.Errorf("%s: runs %q, which is not a Kagzi binary with known configuration", where, process)
		return
	}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "KAGZI_"):
			if _, ok := known[n]; !ok {
				t.Errorf("%s: sets %s, which %s does not read (it reads %v)", where, n, process, keys(known))
			}
		case strings.HasPrefix(n, "OTEL_"):
		default:
			t.Errorf("%s: sets %s, which is neither a KAGZI_ nor an OTEL_ variable", where, n)
		}
	}
}

// isCredential tells whether an environment variable name or value looks
// like database access, which a worker must never get.
func isCredential(name, value string) bool {
	u := strings.ToUpper(name)
	// A worker's own NATS credentials are what it connects with.
	if strings.HasPrefix(u, "KAGZI_NATS_") {
		return strings.Contains(value, "postgres://") || strings.Contains(value, "postgresql://")
	}
	for _, s := range []string{"DATABASE", "POSTGRES", "PGPASS", "PGUSER", "PGHOST", "PASSWORD", "SECRET"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return strings.Contains(value, "postgres://") || strings.Contains(value, "postgresql://")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestProcessVars guards the reflection the other tests rely on.
func TestProcessVars(t *testing.T) {
	vars := processVars(t)
	for _, s := range []string{"dispatcher", "scheduler", "reaper", "worker"} {
		for _, common := range []string{"KAGZI_NATS_URL", "KAGZI_LOG_LEVEL", "KAGZI_HTTP_ADDR"} {
			if _, ok := vars[s][common]; !ok {
				t.Errorf("%s: %s missing: config.Common not found through embedding", s, common)
			}
		}
	}
	for _, s := range databaseServices {
		if _, ok := vars[s]["KAGZI_DATABASE_URL"]; !ok {
			t.Errorf("%s uses Postgres but its config has no KAGZI_DATABASE_URL", s)
		}
	}
	if _, ok := vars["worker"]["KAGZI_DATABASE_URL"]; ok {
		t.Error("workersvc.Config reads KAGZI_DATABASE_URL: workers must not touch the database")
	}
	if got := vars["worker"]["KAGZI_HTTP_ADDR"].Default; got != ":8080" {
		t.Errorf("KAGZI_HTTP_ADDR defaults to %q; the probes and health checks assume :8080", got)
	}
}

// mayDiffer are variables that services may legitimately set apart.
// Each process connects to NATS as its own role.
var mayDiffer = map[string]bool{"KAGZI_LOG_LEVEL": true, "KAGZI_NATS_USER": true, "KAGZI_NATS_PASSWORD": true,
	"KAGZI_NATS_TOKEN": true, "KAGZI_NATS_NKEY_SEED": true, "KAGZI_NATS_CREDS": true,
	"KAGZI_NATS_TLS_CERT": true, "KAGZI_NATS_TLS_KEY": true}

// checkShared checks that services agree on every variable more than one
// of them reads (KAGZI_LEASE for the dispatcher and the reaper, the URLs,
// the payload limits): env maps each service to its effective settings,
// a variable it does not set taking its struct default.
func checkShared(t *testing.T, where string, env map[string]map[string]string, vars map[string]map[string]processVar) {
	t.Helper()
	readers := map[string][]string{}
	for svc := range env {
		for name := range vars[svc] {
			readers[name] = append(readers[name], svc)
		}
	}
	for name, svcs := range readers {
		if len(svcs) < 2 || mayDiffer[name] {
			continue
		}
		sort.Strings(svcs)
		values := map[string][]string{}
		for _, svc := range svcs {
			v, ok := env[svc][name]
			who := svc
			if !ok {
				v, who = vars[svc][name].Default, svc+" (default)"
			}
			values[v] = append(values[v], who)
		}
		if len(values) > 1 {
			t.Errorf("%s: %s differs between services that must agree on it: %v", where, name, values)
		}
	}
}
