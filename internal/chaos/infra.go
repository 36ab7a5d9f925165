package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/internal/natsserver"
)

// pgCluster is the chaos run's own Postgres cluster, in its directory on a
// free port, so restarting it disturbs nothing else (as
// scripts/ensure-postgres.sh does for tests: initdb, pg_ctl, run as the
// postgres user when root).
type pgCluster struct {
	bindir string
	dir    string // data is dir/data, the socket and the log are in dir
	port   int
	// runas prefixes every command (runuser -u postgres -- when root).
	runas []string
}

// pgBindir finds initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin,
// else the PATH.
func pgBindir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("chaos: initdb not found (install postgresql): the chaos run needs a Postgres cluster of its own to restart")
}

func (c *pgCluster) cmd(ctx context.Context, tool string, args ...string) error {
	bin := filepath.Join(c.bindir, tool)
	if len(c.runas) > 0 {
		return runCmd(ctx, c.runas[0], append(append(append([]string(nil), c.runas[1:]...), bin), args...)...)
	}
	return runCmd(ctx, bin, args...)
}

// startPostgres creates and starts a cluster under dir.
func startPostgres(ctx context.Context, dir string) (*pgCluster, error) {
	bindir, err := pgBindir()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bindir: bindir, dir: dir, port: port}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("chaos: running as root needs a postgres user to run the cluster as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		c.runas = []string{"runuser", "-u", "postgres", "--"}
	}
	if err := c.cmd(ctx, "initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
		port, dir)
	if err := c.cmd(ctx, "pg_ctl", "-D", filepath.Join(dir, "data"), "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60",
		"-o", opts, "start"); err != nil {
		return nil, err
	}
	return c, nil
}

// adminURL is the URL of the cluster's postgres database.
func (c *pgCluster) adminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// restart is `pg_ctl restart -m fast`: every connection is cut, the server
// shuts down and starts again.
func (c *pgCluster) restart(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60",
		"-m", "fast", "restart")
}

func (c *pgCluster) stop(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-w", "-t", "60", "-m", "fast", "stop")
}

// natsServer is the NATS server process: nats-server when it is
// installed, else the embedded server in a child process (the chaos
// command's hidden --serve-nats flag), so it can be killed and restarted
// like any other process.
type natsServer struct {
	bin  string // nats-server, or "" for the embedded helper
	exe  string // the kagzi binary (embedded helper)
	port int
	log  string
	p    *proc
}

// NATSBinary finds nats-server ("" if absent).
func NATSBinary() string {
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/nats-server", "/usr/local/bin/nats-server", "/usr/bin/nats-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsServer) start(ctx context.Context) error {
	var (
		p   *proc
		err error
	)
	if n.bin != "" {
		// 8 MiB payloads, as Kagzi's embedded server and compose run it.
		conf := filepath.Join(filepath.Dir(n.log), "nats.conf")
		body := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmax_payload: %d\n", n.port, natsserver.MaxPayload)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return err
		}
		p, err = startProc("nats", "nats", n.log, os.Environ(), n.bin, "-c", conf)
	} else {
		p, err = startProc("nats", "nats", n.log, os.Environ(), n.exe, "chaos", "--serve-nats", strconv.Itoa(n.port))
	}
	if err != nil {
		return err
	}
	n.p = p
	return waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", n.port), 20*time.Second)
}
