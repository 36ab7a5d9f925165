package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	workersvc "github.com/kagzi/kagzi/services/worker"
	"github.com/kagzi/kagzi/tests/testnats"
)

const secret = "s3cret-Pa55"

// logBuf collects JSON log lines and closes running when the service says
// it runs.
type logBuf struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	running chan struct{}
	once    sync.Once
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bytes.Contains(p, []byte(`"msg":"running"`)) {
		b.once.Do(func() { close(b.running) })
	}
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func register(w *worker.Worker) error {
	return worker.Register(w, "Echo", func(_ workflow.Context, in int) (int, error) { return in, nil })
}

// TestCredentialsAreNeverLogged runs the worker service against a server
// that requires a password, given in the URL or in KAGZI_NATS_USER and
// KAGZI_NATS_PASSWORD: with the right one it runs, with a wrong one it
// fails at start with a clear error; the password is in no log line and
// no error either way.
func TestCredentialsAreNeverLogged(t *testing.T) {
	t.Parallel()
	ns := testnats.StartConfig(t, "authorization { user: kagzi, password: "+strconv.Quote(secret)+" }\n")
	hostport := strings.TrimPrefix(ns.URL(), "nats://")
	cases := []struct {
		name string
		url  string
		auth config.NATSAuth
		ok   bool
	}{
		{"url", "nats://kagzi:" + secret + "@" + hostport, config.NATSAuth{}, true},
		{"url-wrong", "nats://kagzi:" + secret + "x@" + hostport, config.NATSAuth{}, false},
		{"env", ns.URL(), config.NATSAuth{NATSUser: "kagzi", NATSPassword: secret}, true},
		{"env-wrong", ns.URL(), config.NATSAuth{NATSUser: "kagzi", NATSPassword: secret + "x"}, false},
		{"none", ns.URL(), config.NATSAuth{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs := &logBuf{running: make(chan struct{})}
			log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := testConfig(t)
			cfg.NATSURL, cfg.NATSAuth, cfg.LogLevel = c.url, c.auth, "debug"
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- workersvc.Run(ctx, cfg, log, register) }()
			var runErr error
			if c.ok {
				select {
				case <-logs.running:
				case err := <-done:
					t.Fatalf("worker did not start: %v", err)
				case <-time.After(30 * time.Second):
					t.Fatal("worker did not start")
				}
				cancel()
				runErr = <-done
				if runErr != nil {
					t.Fatalf("worker: %v", runErr)
				}
			} else {
				select {
				case runErr = <-done:
				case <-logs.running:
					t.Fatal("worker ran with bad credentials")
				case <-time.After(30 * time.Second):
					t.Fatal("worker with bad credentials did not fail at start")
				}
				if runErr == nil || !strings.Contains(strings.ToLower(runErr.Error()), "authorization") {
					t.Fatalf("error %v, want an authorization error", runErr)
				}
				if strings.Contains(c.url, "@") && !strings.Contains(runErr.Error(), "kagzi:xxxxx@") {
					t.Errorf("error %q does not show the redacted URL", runErr)
				}
			}
			out := logs.String()
			if c.ok && out == "" {
				t.Error("no log lines: nothing was checked")
			}
			for _, line := range append(strings.Split(out, "\n"), errString(runErr)) {
				if strings.Contains(line, secret) {
					t.Errorf("password in %q", line)
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nats://u:p@h:4222":                       "nats://u:xxxxx@h:4222",
		"nats://tok@h:4222":                       "nats://xxxxx@h:4222",
		"nats://h:4222":                           "nats://h:4222",
		"nats://a:b@h1:4222,nats://c:d@h2:4222":   "nats://a:xxxxx@h1:4222,nats://c:xxxxx@h2:4222",
		"postgres://u:p@db/kagzi?sslmode=disable": "postgres://u:xxxxx@db/kagzi?sslmode=disable",
		"nats://u:p@h:bad%zz":                     "xxxxx@h:bad%zz",
	} {
		if got := config.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTokenAndNKeyAuth: the worker service connects with KAGZI_NATS_TOKEN
// and with KAGZI_NATS_NKEY_SEED (a seed file), and fails at start with a
// wrong one.
func TestTokenAndNKeyAuth(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	dir := t.TempDir()
	seedFile, otherFile := filepath.Join(dir, "user.nk"), filepath.Join(dir, "other.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	tokenSrv := testnats.StartConfig(t, "authorization { token: "+strconv.Quote(secret)+" }\n")
	nkeySrv := testnats.StartConfig(t, "authorization { users: [{ nkey: "+pub+" }] }\n")
	for _, c := range []struct {
		name string
		url  string
		auth config.NATSAuth
		ok   bool
	}{
		{"token", tokenSrv.URL(), config.NATSAuth{NATSToken: secret}, true},
		{"token-wrong", tokenSrv.URL(), config.NATSAuth{NATSToken: "nope"}, false},
		{"nkey", nkeySrv.URL(), config.NATSAuth{NATSNKeySeed: seedFile}, true},
		{"nkey-wrong", nkeySrv.URL(), config.NATSAuth{NATSNKeySeed: otherFile}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &logBuf{running: make(chan struct{})}
			cfg := testConfig(t)
			cfg.NATSURL, cfg.NATSAuth = c.url, c.auth
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- workersvc.Run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), register) }()
			select {
			case <-logs.running:
				if !c.ok {
					t.Fatal("worker ran with a wrong credential")
				}
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			case err := <-done:
				if c.ok || err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
					t.Fatalf("worker: %v", err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), string(otherSeed)) {
					t.Errorf("error shows a secret: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("worker neither ran nor failed")
			}
		})
	}
}

// TestCredsFileAuth: the worker service connects with KAGZI_NATS_CREDS, a
// credentials file (user JWT and seed) of an operator-mode server.
func TestCredsFileAuth(t *testing.T) {
	t.Parallel()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	useed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	credsFile := filepath.Join(dir, "user.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := testnats.StartConfig(t, "operator: "+strconv.Quote(ojwt)+"\nresolver: MEMORY\nresolver_preload: {\n  "+apub+": "+strconv.Quote(ajwt)+"\n}\n")
	for _, c := range []struct {
		name string
		auth config.NATSAuth
		ok   bool
	}{{"creds", config.NATSAuth{NATSCreds: credsFile}, true}, {"none", config.NATSAuth{}, false}} {
		logs := &logBuf{running: make(chan struct{})}
		cfg := testConfig(t)
		cfg.NATSURL, cfg.NATSAuth = ns.URL(), c.auth
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- workersvc.Run(ctx, cfg, slog.New(slog.NewJSONHandler(logs, nil)), register) }()
		select {
		case <-logs.running:
			if !c.ok {
				t.Fatalf("%s: worker ran without credentials", c.name)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		case err := <-done:
			if c.ok || err == nil {
				t.Fatalf("%s: worker: %v", c.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: worker neither ran nor failed", c.name)
		}
		cancel()
	}
}

// testConfig is the worker service's configuration at its defaults, with
// one slot, short timeouts and no HTTP endpoints.
func testConfig(t *testing.T) workersvc.Config {
	t.Helper()
	cfg, err := config.Defaults[workersvc.Config](context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConcurrency, cfg.HeartbeatInterval, cfg.WaitTimeout, cfg.DrainTimeout = 1, time.Second, time.Second, time.Second
	cfg.HTTPAddr = ""
	return cfg
}
