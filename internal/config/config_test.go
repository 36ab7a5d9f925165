package config_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/services/scheduler"
	workersvc "github.com/kagzi/kagzi/services/worker"
)

// envTags returns every variable declared in this package's structs, the
// services' (services/*/config.go) and the worker SDK's, which the worker
// service embeds (pkg/worker/config.go), with its default, read from the
// source so a new struct is covered without being listed here.
func envTags(t *testing.T) map[string]string {
	t.Helper()
	services, err := filepath.Glob("../../services/*/config.go")
	if err != nil || len(services) != 4 {
		t.Fatalf("services' config files: %v %v", services, err)
	}
	vars := map[string]string{}
	for _, file := range append([]string{"config.go", "../../pkg/worker/config.go"}, services...) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		envTagsOf(t, f, vars)
	}
	if len(vars) < 10 {
		t.Fatalf("found only %d variables; is the parser reading the right file?", len(vars))
	}
	return vars
}

func envTagsOf(t *testing.T, f *ast.File, vars map[string]string) {
	ast.Inspect(f, func(n ast.Node) bool {
		field, ok := n.(*ast.Field)
		if !ok || field.Tag == nil {
			return true
		}
		tag, err := strconv.Unquote(field.Tag.Value)
		if err != nil {
			t.Fatal(err)
		}
		env, ok := reflect.StructTag(tag).Lookup("env")
		if !ok {
			return true
		}
		name, rest, _ := strings.Cut(env, ",")
		if strings.TrimSpace(name) == "" {
			return true // options only (noinit): no variable
		}
		def := ""
		if _, d, ok := strings.Cut(rest, "default="); ok {
			def = d
		}
		vars[strings.TrimSpace(name)] = def
		return true
	})
}

func TestBadValuesNameTheVariable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cfg  any
		env  map[string]string
		want string
	}{
		{&dispatcher.Config{}, map[string]string{"KAGZI_LEASE": "nonsense"}, "KAGZI_LEASE"},
		{&dispatcher.Config{}, map[string]string{"KAGZI_LEASE": "10ms"}, "KAGZI_LEASE"},
		{&dispatcher.Config{}, map[string]string{"KAGZI_MAX_CLAIM": "0"}, "KAGZI_MAX_CLAIM"},
		{&dispatcher.Config{}, map[string]string{"KAGZI_LOG_LEVEL": "loud"}, "KAGZI_LOG_LEVEL"},
		{&dispatcher.Config{}, map[string]string{"KAGZI_GC_PERCENT": "10"}, "KAGZI_GC_PERCENT"},
		{&workersvc.Config{}, map[string]string{"KAGZI_GC_PERCENT": "2000"}, "KAGZI_GC_PERCENT"},
		{&reaper.Config{}, map[string]string{"KAGZI_GC_PERCENT": "lots"}, "KAGZI_GC_PERCENT"},
		{&workersvc.Config{}, map[string]string{"KAGZI_QUEUE": "a.b"}, "KAGZI_QUEUE"},
		{&workersvc.Config{}, map[string]string{"KAGZI_MAX_CONCURRENCY": "-1"}, "KAGZI_MAX_CONCURRENCY"},
		{&workersvc.Config{}, map[string]string{"KAGZI_WAIT_TIMEOUT": "1ms"}, "KAGZI_WAIT_TIMEOUT"},
		// Every duration has a maximum.
		{&dispatcher.Config{}, map[string]string{"KAGZI_LEASE": "2h"}, "KAGZI_LEASE"},
		{&reaper.Config{}, map[string]string{"KAGZI_LEASE": "2h"}, "KAGZI_LEASE"},
		{&dispatcher.Config{}, map[string]string{"KAGZI_DELIVERY_TIMEOUT": "876000h"}, "KAGZI_DELIVERY_TIMEOUT"},
		{&reaper.Config{}, map[string]string{"KAGZI_WORKER_RETENTION": "2562047h"}, "KAGZI_WORKER_RETENTION"},
		{&workersvc.Config{}, map[string]string{"KAGZI_HEARTBEAT_INTERVAL": "2h"}, "KAGZI_HEARTBEAT_INTERVAL"},
		{&workersvc.Config{}, map[string]string{"KAGZI_DRAIN_TIMEOUT": "876000h"}, "KAGZI_DRAIN_TIMEOUT"},
		{&workersvc.Config{}, map[string]string{"KAGZI_MAX_INLINE_RETRY": "1h"}, "KAGZI_MAX_INLINE_RETRY"},
	}
	for _, c := range cases {
		err := config.LoadFrom(context.Background(), c.cfg, envconfig.MapLookuper(c.env))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T with %v: %v, want ErrInvalid naming %s", c.cfg, c.env, err, c.want)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	t.Parallel()
	for _, cfg := range []any{&dispatcher.Config{}, &reaper.Config{}, &scheduler.Config{}, &workersvc.Config{}} {
		if err := config.LoadFrom(context.Background(), cfg, envconfig.MapLookuper(nil)); err != nil {
			t.Errorf("%T defaults: %v", cfg, err)
		}
	}
}

// The worker service's configuration embeds the SDK's: its variables
// land there, and the logger (no variable) stays unset.
func TestWorkerServiceEmbedsTheSDKConfig(t *testing.T) {
	c, err := config.Defaults[workersvc.Config](t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConcurrency != 100 || c.DrainTimeout != 30*time.Second || c.Namespace != "default" || c.Identity != "worker" {
		t.Errorf("worker service defaults: %+v", c)
	}
	if c.Logger != nil {
		t.Error("reading the environment set the worker's Logger")
	}
}

// The reaper's lease may not exceed a dispatcher's.
func TestLeaseCheck(t *testing.T) {
	l := config.Lease{Duration: 30 * time.Second}
	if err := l.Check(30*time.Second, "d1"); err != nil {
		t.Errorf("equal leases: %v", err)
	}
	if err := l.Check(time.Minute, "d1"); err != nil {
		t.Errorf("a longer dispatcher lease: %v", err)
	}
	if err := l.Check(20*time.Second, "d1"); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "d1's 20s") {
		t.Errorf("a shorter dispatcher lease: %v", err)
	}
}

func TestDefaultsAreTheTags(t *testing.T) {
	type cfg struct {
		config.Common
		config.Lease
	}
	c, err := config.Defaults[cfg](t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Lease.Duration != 30*time.Second || c.NATSURL != "nats://127.0.0.1:4222" {
		t.Errorf("defaults: lease %v, NATS URL %q", c.Lease.Duration, c.NATSURL)
	}
}
