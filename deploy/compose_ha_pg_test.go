package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBindir is the newest PostgreSQL server installation's bin directory.
func pgBindir(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	t.Skip("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)")
	return ""
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// pgProc is a process of the test run as the postgres user; done is
// closed once it has exited, with its error in err.
type pgProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// stop asks for a fast shutdown (SIGINT) and waits for it.
func (p *pgProc) stop(t *testing.T) {
	t.Helper()
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// TestComposeHAPostgresFailover runs the HA variant's Postgres design on
// the host's PostgreSQL, as the postgres user on loopback ports: a primary
// with compose.ha.yaml's settings and pg_hba.conf, a standby made by
// deploy/postgres/standby.sh, then the manual failover the file documents.
// It checks that the primary's first-start setup commits before any
// standby exists (PGOPTIONS), that a commit waits for the standby, that
// the standby streams as the synchronous one, and that after the primary
// stops and the standby is promoted the services' multi-host URL reaches
// it with nothing committed lost; a restart of the promoted standby keeps
// it a primary.
func TestComposeHAPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs the servers as the postgres user: needs root")
	}
	bin := pgBindir(t)
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user")
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)

	p := loadComposeHA(t, nil)
	pri := service(t, p, haPGPrimary)
	sb := service(t, p, haPGStandby)
	env := func(s string) string { v, _ := envValue(pri, s); return v }
	admin, password := env("POSTGRES_USER"), env("POSTGRES_PASSWORD")

	dir, err := os.MkdirTemp("", "kagzi-ha-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(dir, "pg_hba.conf")
	raw, err := os.ReadFile(filepath.Join("postgres", "pg_hba.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	p1, p2 := freeLoopbackPort(t), freeLoopbackPort(t)
	// Where the containers' addresses and paths become the test's.
	local := []string{"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir, "-c", "hba_file=" + hba}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args []string, extraEnv ...string) *pgProc {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "LANG=C.UTF-8"}, extraEnv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pp := &pgProc{cmd: cmd, done: make(chan struct{})}
		go func() { pp.err = cmd.Wait(); logf.Close(); close(pp.done) }()
		t.Cleanup(func() {
			pp.stop(t)
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Logf("%s log:\n%s", name, b)
			}
		})
		return pp
	}
	runOnce := func(args ...string) {
		t.Helper()
		pp := run(filepath.Base(args[0]), args)
		<-pp.done
		if err := pp.err; err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, filepath.Base(args[0])+".log"))
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
	}
	url := func(port int, db string) string {
		return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", admin, password, port, db)
	}
	// connect retries until the server accepts connections.
	connect := func(u string) *pgx.Conn {
		t.Helper()
		if _, err := pgx.ParseConfig(u); err != nil {
			t.Fatal(err)
		}
		for {
			c, err := pgx.Connect(ctx, u)
			if err == nil {
				t.Cleanup(func() { c.Close(context.Background()) })
				return c
			}
			if ctx.Err() != nil {
				t.Fatalf("connect %s: %v", u, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	value := func(c *pgx.Conn, q string) string {
		t.Helper()
		var v string
		if err := c.QueryRow(ctx, q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	waitFor := func(what string, c *pgx.Conn, q, want string) {
		t.Helper()
		for {
			var v string
			err := c.QueryRow(ctx, q).Scan(&v)
			if err == nil && v == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %s gave %q (%v), want %q", what, q, v, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The primary, initialised as the image's entrypoint does, run with
	// compose.ha.yaml's command.
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOnce(filepath.Join(bin, "initdb"), "--pgdata="+filepath.Join(dir, "primary"), "--username="+admin, "--pwfile="+pwfile,
		"--encoding=UTF8", "--locale=C.UTF-8", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync")
	primary := run("primary", slices.Concat([]string{filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "primary")},
		pri.Command[1:], local, []string{"-p", strconv.Itoa(p1)}))
	pc := connect(url(p1, "postgres"))
	if got := value(pc, "show synchronous_standby_names"); !strings.Contains(got, "kagzi_standby") {
		t.Fatalf("primary: synchronous_standby_names %q", got)
	}
	// Without a standby a commit waits: a plain session's does not return.
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = pc.Exec(short, "create table kagzi_ha_probe (id int primary key)")
	cancelShort()
	if err == nil {
		t.Fatal("a commit returned with no standby: replication is not synchronous")
	}
	pc.Close(ctx)
	pc = connect(url(p1, "postgres"))
	// The image's first-start setup creates the database with psql, in the
	// container, where PGOPTIONS is set: it commits alone.
	opts, _ := envValue(pri, "PGOPTIONS")
	setup := run("psql", []string{filepath.Join(bin, "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", dir, "-p", strconv.Itoa(p1),
		"-U", admin, "-d", "postgres", "-c", "CREATE DATABASE " + pgx.Identifier{env("POSTGRES_DB")}.Sanitize()}, "PGOPTIONS="+opts)
	select {
	case <-setup.done:
		if setup.err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "psql.log"))
			t.Fatalf("CREATE DATABASE with PGOPTIONS %q: %v\n%s", opts, setup.err, b)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("CREATE DATABASE with PGOPTIONS %q waits for a standby that does not exist yet", opts)
	}

	// The standby, made by standby.sh as compose runs it.
	if !slices.Equal(sb.Entrypoint[:2], []string{"sh", "/etc/kagzi/standby.sh"}) {
		t.Fatalf("standby entrypoint %q", sb.Entrypoint)
	}
	script, _ := filepath.Abs(filepath.Join("postgres", "standby.sh"))
	standbyEnv := []string{"PGDATA=" + filepath.Join(dir, "standby"), "POSTGRES_USER=" + admin, "POSTGRES_PASSWORD=" + password}
	standbyArgs := slices.Concat([]string{"sh", script, fmt.Sprintf("127.0.0.1:%d", p1)}, local, []string{"-c", "port=" + strconv.Itoa(p2)})
	standby := run("standby", standbyArgs, standbyEnv...)
	sc := connect(url(p2, "postgres"))
	waitFor("standby streams", sc, "select coalesce((select status from pg_stat_wal_receiver), 'none')", "streaming")
	waitFor("primary sees the synchronous standby", pc,
		"select coalesce((select sync_state from pg_stat_replication where application_name = 'kagzi_standby'), 'none')", "sync")

	// What the services connect with, the hosts made the test's.
	mu, _ := envValue(service(t, p, "migrate"), "KAGZI_DATABASE_URL")
	multi := strings.NewReplacer("@postgres:5432,postgres-standby:5432/", fmt.Sprintf("@127.0.0.1:%d,127.0.0.1:%d/", p1, p2)).Replace(mu)
	if multi == mu {
		t.Fatalf("migrate's URL %q does not name postgres:5432,postgres-standby:5432", mu)
	}
	mc := connect(multi)
	if _, err := mc.Exec(ctx, "create table kagzi_ha (id int primary key)"); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Exec(ctx, "insert into kagzi_ha values (1)"); err != nil {
		t.Fatalf("a commit with the standby streaming: %v", err)
	}
	if port := value(mc, "show port"); port != strconv.Itoa(p1) {
		t.Errorf("the multi-host URL reached port %s, want the primary's %d", port, p1)
	}
	mc.Close(ctx)

	// The failover compose.ha.yaml documents: stop the primary, promote.
	pc.Close(ctx)
	primary.stop(t)
	runOnce(filepath.Join(bin, "pg_ctl"), "promote", "-w", "-D", filepath.Join(dir, "standby"))
	waitFor("promoted", sc, "select pg_is_in_recovery()::text", "false")
	mc = connect(multi)
	if port := value(mc, "show port"); port != strconv.Itoa(p2) {
		t.Errorf("after the failover the multi-host URL reached port %s, want the promoted standby's %d", port, p2)
	}
	if got := value(mc, "select string_agg(id::text, ',') from kagzi_ha"); got != "1" {
		t.Errorf("after the failover the table holds %q, want the row committed before it", got)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = mc.Exec(wctx, "insert into kagzi_ha values (2)")
	wcancel()
	if err != nil {
		t.Errorf("a commit on the promoted standby (it must not wait for a standby of its own): %v", err)
	}
	mc.Close(ctx)

	// A restart runs standby.sh again: no new copy, still the primary.
	sc.Close(ctx)
	standby.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "standby", "standby.signal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("standby.signal after the promotion: %v", err)
	}
	run("standby-again", standbyArgs, standbyEnv...)
	sc = connect(url(p2, env("POSTGRES_DB")))
	if v := value(sc, "select pg_is_in_recovery()::text"); v != "false" {
		t.Errorf("the promoted standby restarted in recovery")
	}
	if got := value(sc, "select string_agg(id::text, ',' order by id) from kagzi_ha"); got != "1,2" {
		t.Errorf("after the restart the table holds %q, want 1,2 (a new copy would have lost nothing only by luck)", got)
	}
}
