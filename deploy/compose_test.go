package deploy_test

import (
	"context"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsauth"
	"github.com/kagzi/kagzi/pkg/protocol"
)

const composeFile = "compose.yaml"

// kagziServices are the compose services run from the Kagzi image, by the
// binary each runs.
var kagziServices = map[string]string{
	"migrate":    "kagzi",
	"dispatcher": "dispatcher",
	"scheduler":  "scheduler",
	"reaper":     "reaper",
	"worker":     "worker",
	"console":    "kagzi",
}

// loadCompose loads deploy/compose.yaml the way `docker compose` does
// (schema validation, interpolation, normalisation) with env as the only
// environment: the test never sees the caller's variables or a .env.
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	return loadComposeFiles(t, env, composeFile)
}

// loadComposeFiles loads files as `docker compose -f F1 -f F2 ...` does:
// each later file overrides the ones before it.
func loadComposeFiles(t *testing.T, env map[string]string, files ...string) *types.Project {
	t.Helper()
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory("."),
		cli.WithEnv(kv),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("load %v: %v", files, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("compose: %v", err)
	}
	return s
}

func envValue(s types.ServiceConfig, name string) (string, bool) {
	v, ok := s.Environment[name]
	if !ok || v == nil {
		return "", ok
	}
	return *v, true
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t, nil)
	want := []string{"postgres", "nats", "jaeger", "prometheus", "grafana", "migrate", "dispatcher", "scheduler", "reaper", "worker", "console"}
	got := p.ServiceNames()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("service %q missing (have %v)", w, got)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("unexpected service %q: add it to this test", g)
		}
	}
	if p.Name != "kagzi" {
		t.Errorf("project name %q, want kagzi", p.Name)
	}
}

// TestComposeKagziImage: every Kagzi service runs the one image built from
// the repository's Dockerfile, and exactly one service (migrate) builds it:
// compose builds once per service with a build section, so a section on
// each would build the same image six times, in parallel (seen on the
// first real `docker compose build`, make test-compose).
func TestComposeKagziImage(t *testing.T) {
	p := loadCompose(t, nil)
	built := dockerfileBinaries(t)
	image := service(t, p, "migrate").Image
	if image == "" {
		t.Fatal("migrate: no image name: the Kagzi services share the image by its name")
	}
	for name, binary := range kagziServices {
		s := service(t, p, name)
		if name != "migrate" {
			if s.Build != nil {
				t.Errorf("%s: a build section of its own: only migrate builds the Kagzi image (compose would build it once more)", name)
			}
			// Else `up --build` tries to pull the image migrate builds.
			if s.PullPolicy != types.PullPolicyNever {
				t.Errorf("%s: pull_policy %q, want never: migrate builds (or pulls) the image it runs", name, s.PullPolicy)
			}
		} else if s.Build == nil {
			t.Errorf("migrate: no build section: it builds the image every Kagzi service runs, from the repository's Dockerfile")
		} else {
			root, _ := filepath.Abs(repoRoot)
			if filepath.Clean(s.Build.Context) != root {
				t.Errorf("%s: build context %s, want the repository root %s", name, s.Build.Context, root)
			}
			if filepath.Base(s.Build.Dockerfile) != "Dockerfile" {
				t.Errorf("%s: dockerfile %q, want the root Dockerfile", name, s.Build.Dockerfile)
			}
		}
		if s.Image != image {
			t.Errorf("%s: image %q, want the one image every Kagzi service shares (%q, built by migrate)", name, s.Image, image)
		}
		if len(s.Command) == 0 {
			t.Errorf("%s: no command: the image has no ENTRYPOINT, the command picks the binary", name)
			continue
		}
		if b := path.Base(s.Command[0]); b != binary {
			t.Errorf("%s: command %q runs %q, want %q", name, s.Command, b, binary)
		}
		if !slices.Contains(built, path.Base(s.Command[0])) {
			t.Errorf("%s: command %q: the Dockerfile builds no such binary (it builds %v)", name, s.Command, built)
		}
	}
}

// TestComposeScalable: no Kagzi service may pin a container name or a host
// port, or `--scale` could not start a second replica.
func TestComposeScalable(t *testing.T) {
	p := loadCompose(t, nil)
	for name := range kagziServices {
		s := service(t, p, name)
		if s.ContainerName != "" {
			t.Errorf("%s: container_name %q prevents scaling", name, s.ContainerName)
		}
		// The console is a UI: its one published port is on loopback.
		if len(s.Ports) > 0 && !(name == "console" && len(s.Ports) == 1 && s.Ports[0].HostIP == "127.0.0.1") {
			t.Errorf("%s: publishes ports %v; Kagzi services need none and a fixed host port prevents scaling", name, s.Ports)
		}
	}
}

func TestComposeWorkerHasNoDatabase(t *testing.T) {
	p := loadCompose(t, nil)
	w := service(t, p, "worker")
	for k, v := range w.Environment {
		val := ""
		if v != nil {
			val = *v
		}
		if isCredential(k, val) {
			t.Errorf("worker: environment %s=%q: workers get NATS only, no database access", k, val)
		}
	}
	if len(w.EnvFiles) > 0 || len(w.Secrets) > 0 {
		t.Errorf("worker: env_file %v / secrets %v: workers get no credentials", w.EnvFiles, w.Secrets)
	}
	for _, dep := range []string{"postgres", "migrate"} {
		if _, ok := w.DependsOn[dep]; ok {
			t.Errorf("worker depends on %s: workers do not use the database", dep)
		}
	}
	if v, _ := envValue(w, "KAGZI_NATS_URL"); v != "nats://nats:4222" {
		t.Errorf("worker: KAGZI_NATS_URL %q, want nats://nats:4222", v)
	}
}

func TestComposeDependsOn(t *testing.T) {
	p := loadCompose(t, nil)
	want := map[string]map[string]string{
		"migrate": {"postgres": types.ServiceConditionHealthy},
		"worker":  {"nats": types.ServiceConditionHealthy},
	}
	for _, s := range databaseServices {
		want[s] = map[string]string{
			"postgres": types.ServiceConditionHealthy,
			"migrate":  types.ServiceConditionCompletedSuccessfully,
			"nats":     types.ServiceConditionHealthy,
		}
	}
	for name, deps := range want {
		s := service(t, p, name)
		for dep, cond := range deps {
			got, ok := s.DependsOn[dep]
			if !ok {
				t.Errorf("%s: does not depend on %s", name, dep)
				continue
			}
			if got.Condition != cond {
				t.Errorf("%s: depends on %s with condition %q, want %q", name, dep, got.Condition, cond)
			}
		}
	}
	// Every condition must be satisfiable: service_healthy needs a health
	// check, service_completed_successfully a one-shot service.
	for _, s := range p.Services {
		for dep, d := range s.DependsOn {
			target := service(t, p, dep)
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
					t.Errorf("%s waits for %s to be healthy, but %s has no health check", s.Name, dep, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if target.Restart != "" && target.Restart != types.RestartPolicyNo {
					t.Errorf("%s waits for %s to complete, but %s restarts (%q)", s.Name, dep, dep, target.Restart)
				}
			}
		}
	}
}

func TestComposeHealthChecks(t *testing.T) {
	p := loadCompose(t, nil)
	for name := range kagziServices {
		s := service(t, p, name)
		if name == "migrate" {
			if s.HealthCheck != nil && !s.HealthCheck.Disable {
				t.Errorf("migrate is a one-shot job; it needs no health check")
			}
			continue
		}
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 3 {
			t.Errorf("%s: no health check", name)
			continue
		}
		// The image is distroless: only exec-form checks with a binary of
		// the image can run (CMD-SHELL needs a shell).
		if hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/healthcheck" {
			t.Errorf("%s: health check %q, want [CMD /usr/local/bin/healthcheck URL]", name, hc.Test)
			continue
		}
		u, err := url.Parse(hc.Test[2])
		if err != nil || u.Path != "/healthz" || u.Port() != "8080" {
			t.Errorf("%s: health check URL %q, want http://127.0.0.1:8080/healthz", name, hc.Test[2])
		}
	}
	pg := service(t, p, "postgres")
	if pg.HealthCheck == nil || !strings.Contains(strings.Join(pg.HealthCheck.Test, " "), "pg_isready") {
		t.Errorf("postgres: health check %v, want pg_isready", pg.HealthCheck)
	}
	nats := service(t, p, "nats")
	if nats.HealthCheck == nil || !strings.Contains(strings.Join(nats.HealthCheck.Test, " "), ":8222/healthz") {
		t.Errorf("nats: health check %v, want a GET of the monitoring port's /healthz", nats.HealthCheck)
	}
}

func TestComposeEnvironment(t *testing.T) {
	p := loadCompose(t, nil)
	vars := processVars(t)
	for name, binary := range kagziServices {
		s := service(t, p, name)
		checkEnv(t, "compose service "+name, binary, keys(s.Environment), vars)
		if v, _ := envValue(s, "KAGZI_NATS_URL"); v != "nats://nats:4222" {
			t.Errorf("%s: KAGZI_NATS_URL %q, want nats://nats:4222", name, v)
		}
		if name == "migrate" {
			continue
		}
		if v, _ := envValue(s, "OTEL_SERVICE_NAME"); v != "kagzi-"+name {
			t.Errorf("%s: OTEL_SERVICE_NAME %q, want kagzi-%s", name, v, name)
		}
		if v, _ := envValue(s, "OTEL_EXPORTER_OTLP_ENDPOINT"); v != "http://jaeger:4318" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q, want http://jaeger:4318", name, v)
		}
		// Jaeger has no OTLP metrics endpoint: exporting metrics there would
		// fail on every interval.
		if v, _ := envValue(s, "OTEL_METRICS_EXPORTER"); v != "none" {
			t.Errorf("%s: OTEL_METRICS_EXPORTER %q, want none (Jaeger takes traces only)", name, v)
		}
	}
	shared := map[string]map[string]string{}
	for name, binary := range kagziServices {
		if _, ok := serviceConfigs[binary]; ok {
			shared[binary] = map[string]string{}
			for k := range service(t, p, name).Environment {
				shared[binary][k], _ = envValue(service(t, p, name), k)
			}
		}
	}
	checkShared(t, "compose", shared, vars)
	for _, name := range append([]string{"migrate"}, databaseServices...) {
		s := service(t, p, name)
		v, ok := envValue(s, "KAGZI_DATABASE_URL")
		if !ok {
			t.Errorf("%s: no KAGZI_DATABASE_URL", name)
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.Host != "postgres:5432" {
			t.Errorf("%s: KAGZI_DATABASE_URL %q, want the compose postgres service", name, v)
		}
	}
}

// TestComposeCredentials: the database credentials come from variables
// with local defaults, and the services' URL follows them.
func TestComposeCredentials(t *testing.T) {
	for _, tc := range []struct {
		env                map[string]string
		user, password, db string
	}{
		{nil, "kagzi", "kagzi", "kagzi"},
		{map[string]string{"POSTGRES_USER": "u1", "POSTGRES_PASSWORD": "from-env-4f2c", "POSTGRES_DB": "d1",
			"KAGZI_DB_RUNTIME_PASSWORD": "rt-env-77", "KAGZI_DB_SQL_PASSWORD": "sql-env-31"}, "u1", "from-env-4f2c", "d1"},
	} {
		p := loadCompose(t, tc.env)
		pg := service(t, p, "postgres")
		for k, want := range map[string]string{"POSTGRES_USER": tc.user, "POSTGRES_PASSWORD": tc.password, "POSTGRES_DB": tc.db} {
			if got, _ := envValue(pg, k); got != want {
				t.Errorf("env %v: postgres %s = %q, want %q", tc.env, k, got, want)
			}
		}
		// migrate connects as the administrator (it creates the roles);
		// the services as the runtime role, with the password migrate set.
		runtimePW, _ := envValue(service(t, p, "migrate"), "KAGZI_DB_RUNTIME_PASSWORD")
		if runtimePW == "" {
			t.Errorf("migrate: no KAGZI_DB_RUNTIME_PASSWORD")
		}
		// The SQL functions' role (docs/sql.md) gets its password too.
		wantSQL := "kagzi-sql"
		if v, ok := tc.env["KAGZI_DB_SQL_PASSWORD"]; ok {
			wantSQL = v
		}
		if got, _ := envValue(service(t, p, "migrate"), "KAGZI_DB_SQL_PASSWORD"); got != wantSQL {
			t.Errorf("env %v: migrate KAGZI_DB_SQL_PASSWORD = %q, want %q", tc.env, got, wantSQL)
		}
		for _, name := range append([]string{"migrate"}, databaseServices...) {
			v, _ := envValue(service(t, p, name), "KAGZI_DATABASE_URL")
			u, err := url.Parse(v)
			if err != nil {
				t.Errorf("%s: KAGZI_DATABASE_URL %q: %v", name, v, err)
				continue
			}
			user, password := tc.user, tc.password
			if name != "migrate" {
				user, password = "kagzi_runtime", runtimePW
			}
			pw, _ := u.User.Password()
			if u.User.Username() != user || pw != password || strings.TrimPrefix(u.Path, "/") != tc.db {
				t.Errorf("env %v: %s: KAGZI_DATABASE_URL %q, want user %s and its password on database %s", tc.env, name, v, user, tc.db)
			}
		}
		if m := service(t, p, "migrate"); !slices.Contains(m.Command, "--roles") {
			t.Errorf("migrate: command %q does not set up the Postgres roles (--roles)", m.Command)
		}
	}
	raw, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "${POSTGRES_PASSWORD:-") {
		t.Error("the Postgres password is not taken from ${POSTGRES_PASSWORD:-default}")
	}
}

func TestComposePostgres(t *testing.T) {
	p := loadCompose(t, nil)
	pg := service(t, p, "postgres")
	if !strings.HasPrefix(pg.Image, "postgres:15") && !strings.HasPrefix(pg.Image, "postgres:16") {
		t.Errorf("postgres image %q, want postgres:15 or postgres:16", pg.Image)
	}
	named := false
	for _, v := range pg.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Target == "/var/lib/postgresql/data" {
			if _, ok := p.Volumes[v.Source]; ok {
				named = true
			}
		}
	}
	if !named {
		t.Errorf("postgres: data is not on a named volume (volumes %v)", pg.Volumes)
	}
}

func TestComposeNATS(t *testing.T) {
	p := loadCompose(t, nil)
	n := service(t, p, "nats")
	if !strings.HasPrefix(n.Image, "nats:2") {
		t.Errorf("nats image %q, want nats:2", n.Image)
	}
	i := slices.Index(n.Command, "--config")
	if i < 0 || i+1 >= len(n.Command) {
		t.Fatalf("nats: command %q does not load a config file", n.Command)
	}
	confPath := n.Command[i+1]
	var source string
	for _, v := range n.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == confPath {
			source = v.Source
			if !v.ReadOnly {
				t.Errorf("nats: %s is mounted read-write", confPath)
			}
		}
	}
	want, _ := filepath.Abs(filepath.Join("nats", "nats.conf"))
	if source != want {
		t.Fatalf("nats: %s is mounted from %q, want %s", confPath, source, want)
	}
	checkNATSConf(t, source)
	// The server starts through start.sh, which quotes the passwords
	// (internal/natsauth's TestStartScriptTakesAnyPassword runs it).
	if len(n.Command) < 2 || n.Command[0] != "sh" {
		t.Fatalf("nats: command %q, want sh %s", n.Command, natsStartScript)
	}
	script, _ := filepath.Abs(filepath.Join("nats", "start.sh"))
	mounted := false
	for _, v := range n.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == n.Command[1] && v.Source == script && v.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("nats: %s is not deploy/nats/start.sh mounted read-only", n.Command[1])
	}
}

// natsStartScript is where compose and the dev overlay put start.sh.
const natsStartScript = "/etc/nats/start.sh"

// checkNATSConf parses a NATS config file with nats-server's own loader
// and checks what Kagzi needs of it: with authorization, a user per role.
func checkNATSConf(t *testing.T, file string) {
	t.Helper()
	users, err := natsauth.Users(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		t.Setenv(u.PasswordVar, "pw-"+u.Name)
	}
	o, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if o.MaxPayload < protocol.NATSMaxPayload {
		t.Errorf("%s: max_payload %d, want at least %d (2 MiB payloads plus envelope)", file, o.MaxPayload, protocol.NATSMaxPayload)
	}
	if o.Port != 4222 {
		t.Errorf("%s: client port %d, want 4222", file, o.Port)
	}
	if o.HTTPPort != 8222 {
		t.Errorf("%s: monitoring port %d, want 8222 (the health checks use it)", file, o.HTTPPort)
	}
	if !o.JetStream {
		t.Errorf("%s: JetStream is off", file)
	}
	if o.StoreDir != "/data" {
		t.Errorf("%s: JetStream store_dir %q, want /data (the volume)", file, o.StoreDir)
	}
	have := map[string]bool{}
	for _, u := range o.Users {
		have[u.Username] = u.Permissions != nil && u.Password == "pw-"+u.Username
	}
	for _, u := range users {
		if !have[u.Name] {
			t.Errorf("%s: no user %s with permissions and the password of $%s", file, u.Name, u.PasswordVar)
		}
	}
}

// TestComposeNATSAuth: compose runs NATS with authorization on, from the
// file `kagzi nats-config` prints, and every Kagzi process connects as its
// role with the password the server reads: a real nats-server started
// from the compose files and environment accepts each of them and refuses
// a wrong password.
func TestComposeNATSAuth(t *testing.T) {
	want, err := natsauth.Config(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("deploy/nats/auth.conf is not what `kagzi nats-config` prints: regenerate it (go -C cmd/kagzi run . nats-config > deploy/nats/auth.conf, and the dev overlay's copy)")
	}
	users, err := natsauth.Users(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	roleOf := map[string]natsauth.User{}
	for _, u := range users {
		roleOf[u.Name] = u
	}
	wantUser := map[string]string{"migrate": "client-default", "dispatcher": "dispatcher", "scheduler": "scheduler",
		"reaper": "reaper", "worker": "worker-default-worker"}
	// Passwords nats-server would misread unquoted: start.sh quotes them
	// (as natsauth.Quote does, here) before the server reads them.
	for _, env := range []map[string]string{nil, {"KAGZI_NATS_PASSWORD_WORKER_DEFAULT_WORKER": `31 w"env\`, "KAGZI_NATS_PASSWORD_DISPATCHER": "123456"}} {
		p := loadCompose(t, env)
		n := service(t, p, "nats")
		for _, u := range users {
			v, ok := envValue(n, u.PasswordVar)
			if !ok || v == "" {
				t.Fatalf("nats: %s is not set: the server cannot read %s's password", u.PasswordVar, u.Name)
			}
			t.Setenv(u.PasswordVar, natsauth.Quote(v))
		}
		o, err := server.ProcessConfigFile(filepath.Join("nats", "nats.conf"))
		if err != nil {
			t.Fatal(err)
		}
		o.Host, o.Port, o.HTTPPort, o.JetStream, o.StoreDir, o.NoLog, o.NoSigs = "127.0.0.1", server.RANDOM_PORT, 0, false, "", true, true
		ns, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			ns.Shutdown()
			t.Fatal("nats server from deploy/nats/nats.conf not ready for connections")
		}
		for name, user := range wantUser {
			s := service(t, p, name)
			if got, _ := envValue(s, "KAGZI_NATS_USER"); got != user {
				t.Errorf("%s: KAGZI_NATS_USER %q, want %q", name, got, user)
				continue
			}
			pw, _ := envValue(s, "KAGZI_NATS_PASSWORD")
			nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, pw))
			if err != nil {
				t.Errorf("env %v: %s cannot connect as %s: %v", env, name, user, err)
				continue
			}
			nc.Close()
			if nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, pw+"x")); err == nil {
				nc.Close()
				t.Errorf("%s: a wrong password was accepted", user)
			}
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		w := service(t, p, "worker")
		u := roleOf["worker-default-worker"]
		if ns, _ := envValue(w, "KAGZI_NAMESPACE"); ns != u.Namespace {
			t.Errorf("worker: KAGZI_NAMESPACE %q, its NATS user serves %q", ns, u.Namespace)
		}
		if id, _ := envValue(w, "KAGZI_WORKER_IDENTITY"); id != u.Identity {
			t.Errorf("worker: KAGZI_WORKER_IDENTITY %q, its NATS user reads the inbox of %q", id, u.Identity)
		}
	}
}

// TestComposeJaeger: Jaeger v2, its UI and both OTLP ports published on
// the loopback for applications on the host.
func TestComposeJaeger(t *testing.T) {
	p := loadCompose(t, nil)
	j := service(t, p, "jaeger")
	if !strings.HasPrefix(j.Image, "jaegertracing/jaeger:2.") {
		t.Errorf("jaeger image %q, want jaegertracing/jaeger:2.x (v1 all-in-one is end of life)", j.Image)
	}
	for _, port := range []uint32{16686, 4317, 4318} {
		ok := false
		for _, pc := range j.Ports {
			if pc.Target == port && pc.Published == strconv.Itoa(int(port)) && pc.HostIP == "127.0.0.1" {
				ok = true
			}
		}
		if !ok {
			t.Errorf("jaeger: port %d not published on 127.0.0.1 (ports %v)", port, j.Ports)
		}
	}
}

// TestComposeWorkerDrain: docker stop must wait for the worker's drain.
func TestComposeWorkerDrain(t *testing.T) {
	p := loadCompose(t, nil)
	w := service(t, p, "worker")
	drain, err := time.ParseDuration(processVars(t)["worker"]["KAGZI_DRAIN_TIMEOUT"].Default)
	if err != nil {
		t.Fatalf("KAGZI_DRAIN_TIMEOUT default: %v", err)
	}
	if w.StopGracePeriod == nil || time.Duration(*w.StopGracePeriod) <= drain {
		t.Errorf("worker: stop_grace_period %v, want more than KAGZI_DRAIN_TIMEOUT's default %v", w.StopGracePeriod, drain)
	}
}
