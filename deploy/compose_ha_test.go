package deploy_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsauth"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// composeHAFile is the HA override of compose.yaml.
const composeHAFile = "compose.ha.yaml"

// The HA variant's NATS nodes (compose services) and Postgres servers.
var (
	haNATSNodes   = []string{"nats", "nats-2", "nats-3"}
	haPGPrimary   = "postgres"
	haPGStandby   = "postgres-standby"
	haClusterConf = "/etc/nats/cluster.conf"
)

// loadComposeHA loads compose.yaml overridden by compose.ha.yaml, as
// `docker compose -f compose.yaml -f compose.ha.yaml` does.
func loadComposeHA(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	return loadComposeFiles(t, env, composeFile, composeHAFile)
}

// TestComposeHAServices: the override adds the standby and two NATS nodes
// to compose.yaml's services and removes none.
func TestComposeHAServices(t *testing.T) {
	base := loadCompose(t, nil).ServiceNames()
	got := loadComposeHA(t, nil).ServiceNames()
	want := append(slices.Clone(base), haPGStandby, "nats-2", "nats-3")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("services %v, want compose.yaml's plus %s, nats-2, nats-3: %v", got, haPGStandby, want)
	}
}

// natsURLs splits a KAGZI_NATS_URL the way nats.go does (comma-separated
// server URLs) into the compose services it names; each must be a
// nats:// URL on the client port.
func natsURLs(t *testing.T, where, v string) []string {
	t.Helper()
	var hosts []string
	for _, s := range strings.Split(v, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Scheme != "nats" || u.Port() != "4222" || u.User != nil {
			t.Errorf("%s: KAGZI_NATS_URL %q: %q is not nats://HOST:4222 (credentials come from KAGZI_NATS_USER/PASSWORD)", where, v, s)
			continue
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// TestComposeHAEnvironment: every Kagzi process is given all three NATS
// nodes, every database process the multi-host URL that reaches whichever
// server accepts writes, each as the user and password compose.yaml's
// URL has; the variables are still only ones the binaries read.
func TestComposeHAEnvironment(t *testing.T) {
	for _, env := range []map[string]string{nil, {"POSTGRES_USER": "u1", "POSTGRES_PASSWORD": "pw-env-3", "POSTGRES_DB": "d1",
		"KAGZI_DB_RUNTIME_PASSWORD": "rt-env-5"}} {
		p := loadComposeHA(t, env)
		simple := loadCompose(t, env)
		vars := processVars(t)
		for name, binary := range kagziServices {
			s := service(t, p, name)
			checkEnv(t, "compose HA service "+name, binary, keys(s.Environment), vars)
			v, _ := envValue(s, "KAGZI_NATS_URL")
			if hosts := natsURLs(t, name, v); !slices.Equal(hosts, haNATSNodes) {
				t.Errorf("%s: KAGZI_NATS_URL %q names %v, want every node %v", name, v, hosts, haNATSNodes)
			}
			// Everything but the two URLs is compose.yaml's.
			for k := range service(t, simple, name).Environment {
				if k == "KAGZI_NATS_URL" || k == "KAGZI_DATABASE_URL" {
					continue
				}
				a, _ := envValue(s, k)
				b, _ := envValue(service(t, simple, name), k)
				if a != b {
					t.Errorf("%s: %s %q, compose.yaml has %q: the override changes only the URLs", name, k, a, b)
				}
			}
		}
		if _, ok := envValue(service(t, p, "worker"), "KAGZI_DATABASE_URL"); ok {
			t.Error("worker: KAGZI_DATABASE_URL set: workers talk to NATS only")
		}
		for _, name := range append([]string{"migrate", "console"}, databaseServices...) {
			v, _ := envValue(service(t, p, name), "KAGZI_DATABASE_URL")
			sv, _ := envValue(service(t, simple, name), "KAGZI_DATABASE_URL")
			checkMultiHostURL(t, name, v, sv)
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
		checkShared(t, "compose HA", shared, vars)
	}
}

// checkMultiHostURL checks a service's HA database URL: the primary then
// the standby, both on 5432, target_session_attrs=read-write, and the
// user, password, database and options of the single-server URL (simple).
func checkMultiHostURL(t *testing.T, name, v, simple string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(v)
	if err != nil {
		t.Errorf("%s: KAGZI_DATABASE_URL %q: %v", name, v, err)
		return
	}
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		if f.Port != 5432 {
			t.Errorf("%s: KAGZI_DATABASE_URL %q: %s on port %d, want 5432", name, v, f.Host, f.Port)
		}
		if !slices.Contains(hosts, f.Host) {
			hosts = append(hosts, f.Host)
		}
	}
	if !slices.Equal(hosts, []string{haPGPrimary, haPGStandby}) || cfg.Port != 5432 {
		t.Errorf("%s: KAGZI_DATABASE_URL %q reaches %v, want %s then %s", name, v, hosts, haPGPrimary, haPGStandby)
	}
	// pgx tries each host until one accepts writes: a standby (in
	// recovery) is refused, a promoted one taken.
	if cfg.ValidateConnect == nil || reflect.ValueOf(cfg.ValidateConnect).Pointer() !=
		reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer() {
		t.Errorf("%s: KAGZI_DATABASE_URL %q: no target_session_attrs=read-write", name, v)
	}
	// kagzi migrate reads the database name with net/url.
	u, err := url.Parse(v)
	if err != nil {
		t.Errorf("%s: KAGZI_DATABASE_URL %q does not parse as a URL: %v", name, v, err)
		return
	}
	su, err := url.Parse(simple)
	if err != nil {
		t.Fatal(err)
	}
	if u.User.String() != su.User.String() || u.Path != su.Path {
		t.Errorf("%s: KAGZI_DATABASE_URL %q: user or database differ from compose.yaml's %q", name, u.Redacted(), su.Redacted())
	}
	q := u.Query()
	if q.Get("target_session_attrs") != "read-write" {
		t.Errorf("%s: KAGZI_DATABASE_URL %q: target_session_attrs %q", name, u.Redacted(), q.Get("target_session_attrs"))
	}
	q.Del("target_session_attrs")
	if q.Encode() != su.Query().Encode() {
		t.Errorf("%s: KAGZI_DATABASE_URL options %q, want compose.yaml's %q plus target_session_attrs", name, q.Encode(), su.RawQuery)
	}
}

// TestComposeHANATSCluster: the three nodes run cluster.conf, which
// nats-server's loader reads as nats.conf plus routes naming each node,
// each node with its own server name and its own JetStream volume, and the
// same health check, users and passwords as compose.yaml's nats.
func TestComposeHANATSCluster(t *testing.T) {
	p := loadComposeHA(t, nil)
	conf, _ := filepath.Abs(filepath.Join("nats", "cluster.conf"))
	names := map[string]string{}
	volumes := map[string]string{}
	single := service(t, loadCompose(t, nil), "nats")
	for _, node := range haNATSNodes {
		n := service(t, p, node)
		if n.Image != single.Image || !reflect.DeepEqual(n.HealthCheck, single.HealthCheck) || !reflect.DeepEqual(n.Environment, single.Environment) {
			t.Errorf("%s: image, health check or environment differ from compose.yaml's nats", node)
		}
		if len(n.Command) < 2 || n.Command[0] != "sh" || n.Command[1] != natsStartScript {
			t.Errorf("%s: command %q, want sh %s (it quotes the passwords)", node, n.Command, natsStartScript)
		}
		if i := slices.Index(n.Command, "--config"); i < 0 || i+1 >= len(n.Command) || n.Command[i+1] != haClusterConf {
			t.Errorf("%s: command %q does not load %s", node, n.Command, haClusterConf)
		}
		if i := slices.Index(n.Command, "--name"); i < 0 || i+1 >= len(n.Command) {
			t.Errorf("%s: command %q sets no server name (JetStream in a cluster needs one per server)", node, n.Command)
		} else if other, dup := names[n.Command[i+1]]; dup {
			t.Errorf("%s and %s share the server name %s", node, other, n.Command[i+1])
		} else {
			names[n.Command[i+1]] = node
		}
		mounted := map[string]string{}
		for _, v := range n.Volumes {
			if v.Type == types.VolumeTypeBind && !v.ReadOnly {
				t.Errorf("%s: %s is mounted read-write", node, v.Target)
			}
			mounted[v.Target] = v.Source
			if v.Target == "/data" {
				if v.Type != types.VolumeTypeVolume {
					t.Errorf("%s: /data is not a named volume", node)
				} else if other, dup := volumes[v.Source]; dup {
					t.Errorf("%s and %s share the JetStream volume %s", node, other, v.Source)
				} else {
					volumes[v.Source] = node
				}
			}
		}
		if mounted[haClusterConf] != conf {
			t.Errorf("%s: %s is mounted from %q, want %s", node, haClusterConf, mounted[haClusterConf], conf)
		}
		for _, f := range []string{"nats.conf", "auth.conf", "start.sh"} {
			want, _ := filepath.Abs(filepath.Join("nats", f))
			if mounted[filepath.Join(filepath.Dir(haClusterConf), f)] != want && !(f == "start.sh" && mounted[natsStartScript] == want) {
				t.Errorf("%s: deploy/nats/%s is not mounted beside cluster.conf (it includes nats.conf, which includes auth.conf)", node, f)
			}
		}
	}
	if len(volumes) != len(haNATSNodes) {
		t.Errorf("JetStream volumes %v: want one per node", volumes)
	}

	checkNATSConf(t, conf)
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster.Name == "" || o.Cluster.Port != 6222 {
		t.Errorf("cluster.conf: cluster name %q port %d, want a name and port 6222", o.Cluster.Name, o.Cluster.Port)
	}
	var routed []string
	for _, r := range o.Routes {
		if r.Scheme != "nats-route" || r.Port() != "6222" {
			t.Errorf("cluster.conf: route %s, want nats-route://NODE:6222", r)
		}
		routed = append(routed, r.Hostname())
	}
	if !slices.Equal(routed, haNATSNodes) {
		t.Errorf("cluster.conf: routes to %v, want every node %v", routed, haNATSNodes)
	}
	// The client URLs the services get name the same nodes.
	v, _ := envValue(service(t, p, "dispatcher"), "KAGZI_NATS_URL")
	if hosts := natsURLs(t, "dispatcher", v); !slices.Equal(hosts, routed) {
		t.Errorf("KAGZI_NATS_URL names %v, the routes %v", hosts, routed)
	}
}

// TestComposeHANATSFormsCluster: three nats-servers started from
// cluster.conf as it is (only the addresses moved to free loopback ports)
// form one cluster, and a message published on one node reaches a
// subscriber on another.
func TestComposeHANATSFormsCluster(t *testing.T) {
	conf, _ := filepath.Abs(filepath.Join("nats", "cluster.conf"))
	users, err := natsauth.Users(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		t.Setenv(u.PasswordVar, "pw-"+u.Name)
	}
	// Free loopback ports for each node's routes, by node name.
	routePort := map[string]int{}
	for _, node := range haNATSNodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		routePort[node] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var servers []*server.Server
	defer func() {
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}()
	for _, node := range haNATSNodes {
		o, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		o.ServerName = node
		o.Host, o.Port, o.HTTPPort, o.JetStream, o.StoreDir, o.NoLog, o.NoSigs = "127.0.0.1", server.RANDOM_PORT, 0, false, "", true, true
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", routePort[node]
		// The file's routes, each moved to its node's loopback port:
		// every node's list still holds every node, itself included.
		for i, r := range o.Routes {
			p, ok := routePort[r.Hostname()]
			if !ok {
				t.Fatalf("cluster.conf: route %s names no node", r)
			}
			moved := *r
			moved.Host = fmt.Sprintf("127.0.0.1:%d", p)
			o.Routes[i] = &moved
		}
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("%s not ready", node)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range servers {
		for s.NumRoutes() < len(servers)-1 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := s.NumRoutes(); n < len(servers)-1 {
			t.Fatalf("%s: %d routes, want one to each other node", s.Name(), n)
		}
	}
	// A subscriber on the last node receives what the first publishes.
	sub, err := nats.Connect(servers[2].ClientURL(), nats.UserInfo("dispatcher", "pw-dispatcher"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := nats.Connect(servers[0].ClientURL(), nats.UserInfo("dispatcher", "pw-dispatcher"))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// A subject the dispatcher's user may both publish and subscribe to.
	inbox := protocol.SubjectRelayUp
	ch := make(chan *nats.Msg, 1)
	s, err := sub.ChanSubscribe(inbox, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unsubscribe()
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	// Interest crosses the routes asynchronously: publish until it arrives.
	for {
		if err := pub.Publish(inbox, []byte("across")); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ch:
			if string(m.Data) != "across" {
				t.Fatalf("received %q", m.Data)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a message published on nats did not reach a subscriber on nats-3")
		}
	}
}

// TestComposeHAPostgres: the primary runs with a synchronous standby
// named as the standby reports itself, both with the same pg_hba.conf,
// the standby copied from the primary on its own volume and healthy only
// once it streams.
func TestComposeHAPostgres(t *testing.T) {
	p := loadComposeHA(t, nil)
	pri := service(t, p, haPGPrimary)
	sb := service(t, p, haPGStandby)
	simple := service(t, loadCompose(t, nil), haPGPrimary)

	settings := map[string]string{}
	for i, a := range pri.Command {
		if a == "-c" && i+1 < len(pri.Command) {
			k, v, _ := strings.Cut(pri.Command[i+1], "=")
			settings[k] = v
		}
	}
	if len(pri.Command) == 0 || pri.Command[0] != "postgres" {
		t.Errorf("postgres: command %q, want postgres -c ... (the image's entrypoint runs it)", pri.Command)
	}
	standbyName := regexp.MustCompile(`^FIRST 1 \((\w+)\)$`).FindStringSubmatch(settings["synchronous_standby_names"])
	if standbyName == nil {
		t.Fatalf("postgres: synchronous_standby_names %q, want FIRST 1 (NAME)", settings["synchronous_standby_names"])
	}
	for k, want := range map[string]string{"wal_level": "replica", "synchronous_commit": "on", "hba_file": "/etc/kagzi/pg_hba.conf"} {
		if settings[k] != want {
			t.Errorf("postgres: %s = %q, want %q", k, settings[k], want)
		}
	}
	if v, _ := envValue(pri, "PGOPTIONS"); v != "-c synchronous_commit=local" {
		t.Errorf("postgres: PGOPTIONS %q: the image's first-start setup would wait for a standby that cannot exist yet", v)
	}

	hba, _ := filepath.Abs(filepath.Join("postgres", "pg_hba.conf"))
	script, _ := filepath.Abs(filepath.Join("postgres", "standby.sh"))
	for _, s := range []types.ServiceConfig{pri, sb} {
		found := false
		for _, v := range s.Volumes {
			if v.Target == "/etc/kagzi/pg_hba.conf" && v.Source == hba && v.ReadOnly {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: deploy/postgres/pg_hba.conf is not mounted read-only at /etc/kagzi/pg_hba.conf", s.Name)
		}
	}
	raw, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^host\s+replication\s+all\s+all\s+scram-sha-256\s*$`).Match(raw) {
		t.Error("pg_hba.conf: no password login for replication connections: the standby cannot copy or stream")
	}

	// The standby: compose.yaml's postgres (image, credentials) with the
	// script as its entrypoint and a volume of its own.
	if sb.Image != simple.Image || !reflect.DeepEqual(sb.Environment, simple.Environment) {
		t.Errorf("%s: image or environment differ from compose.yaml's postgres (the copy logs in as its administrator)", haPGStandby)
	}
	if !slices.Equal(sb.Entrypoint, []string{"sh", "/etc/kagzi/standby.sh", haPGPrimary}) {
		t.Errorf("%s: entrypoint %q, want sh /etc/kagzi/standby.sh %s", haPGStandby, sb.Entrypoint, haPGPrimary)
	}
	if sb.User != "postgres" {
		t.Errorf("%s: user %q, want postgres (pg_basebackup and the server run as the data directory's owner)", haPGStandby, sb.User)
	}
	var priVol, sbVol string
	for _, v := range pri.Volumes {
		if v.Target == "/var/lib/postgresql/data" {
			priVol = v.Source
		}
	}
	mountedScript := false
	for _, v := range sb.Volumes {
		if v.Target == "/var/lib/postgresql/data" && v.Type == types.VolumeTypeVolume {
			sbVol = v.Source
		}
		if v.Target == "/etc/kagzi/standby.sh" && v.Source == script && v.ReadOnly {
			mountedScript = true
		}
	}
	if sbVol == "" || sbVol == priVol {
		t.Errorf("%s: data volume %q, want a named volume of its own (the primary's is %q)", haPGStandby, sbVol, priVol)
	}
	if !mountedScript {
		t.Errorf("%s: deploy/postgres/standby.sh is not mounted read-only at /etc/kagzi/standby.sh", haPGStandby)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	for _, want := range []string{"pg_basebackup", "--write-recovery-conf", "--wal-method=stream", "-c cluster_name=" + standbyName[1] + " ",
		"-c hba_file=/etc/kagzi/pg_hba.conf"} {
		if !strings.Contains(body, want) {
			t.Errorf("standby.sh: no %q (the primary waits for a standby named %s)", want, standbyName[1])
		}
	}
	if sb.HealthCheck == nil || !strings.Contains(strings.Join(sb.HealthCheck.Test, " "), "pg_stat_wal_receiver") {
		t.Errorf("%s: health check %v, want one that it streams (pg_stat_wal_receiver)", haPGStandby, sb.HealthCheck)
	}
	if d, ok := sb.DependsOn[haPGPrimary]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("%s: does not wait for the primary to be healthy", haPGStandby)
	}
	if d, ok := service(t, p, "migrate").DependsOn[haPGStandby]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("migrate: does not wait for the standby: its first commit would wait for it silently")
	}
	// compose.yaml's checks of the merged project still hold.
	for _, s := range p.Services {
		for dep, d := range s.DependsOn {
			if d.Condition == types.ServiceConditionHealthy {
				if h := service(t, p, dep).HealthCheck; h == nil || h.Disable || len(h.Test) == 0 {
					t.Errorf("%s waits for %s to be healthy, but %s has no health check", s.Name, dep, dep)
				}
			}
		}
	}
}
