// Package pgcluster runs a throwaway Postgres cluster in a directory of its
// own on a free port, for what must not disturb the machine's server: the
// chaos run restarts its cluster, the failover test listens on an address
// the system server does not. As scripts/ensure-postgres.sh does: initdb and
// pg_ctl from the newest installed Postgres, run as the postgres user when
// root (initdb refuses to run as root).
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	bindir string
	dir    string // data is dir/data; the socket and the log are in dir
	host   string
	port   int
	// runas prefixes every command (runuser -u postgres -- when root).
	runas []string
}

// Bindir finds initdb and pg_ctl: the newest /usr/lib/postgresql/*/bin,
// else the PATH.
func Bindir() (string, error) {
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
	return "", errors.New("pgcluster: initdb not found (install postgresql)")
}

// Options configure a cluster.
type Options struct {
	// Listen is the IP address the server listens on (default 127.0.0.1).
	Listen string
	// Trust lists the networks (CIDR) whose connections are trusted, besides
	// the loopback's.
	Trust []string
	// Settings are extra server settings (name=value), applied after the
	// defaults, so they may turn durability back on.
	Settings []string
}

// Start creates a cluster under dir (created if missing) and starts it on
// a free port, trusting every connection it accepts, with durability off
// (nothing in it outlives the run).
func Start(ctx context.Context, dir string, o Options) (*Cluster, error) {
	host := o.Listen
	if host == "" {
		host = "127.0.0.1"
	}
	bindir, err := Bindir()
	if err != nil {
		return nil, err
	}
	port, err := freePort(host)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bindir: bindir, dir: dir, host: host, port: port}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgcluster: running as root needs a postgres user to run the cluster as: %w", err)
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
	if len(o.Trust) > 0 {
		var hba strings.Builder
		for _, n := range o.Trust {
			fmt.Fprintf(&hba, "host all all %s trust\n", n)
		}
		f, err := os.OpenFile(filepath.Join(dir, "data", "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(hba.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c max_connections=300 -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
		port, dir, host)
	for _, kv := range o.Settings {
		opts += " -c " + kv
	}
	if err := c.cmd(ctx, "pg_ctl", "-D", filepath.Join(dir, "data"), "-l", c.LogPath(), "-w", "-t", "60",
		"-o", opts, "start"); err != nil {
		return nil, err
	}
	return c, nil
}

// AdminURL is the URL of the cluster's postgres database.
func (c *Cluster) AdminURL() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
}

// LogPath is the server's log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.dir, "postgres.log") }

// Restart is `pg_ctl restart -m fast`: every connection is cut, the server
// shuts down and starts again.
func (c *Cluster) Restart(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", c.LogPath(), "-w", "-t", "60",
		"-m", "fast", "restart")
}

// Stop is `pg_ctl stop -m fast`.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-w", "-t", "60", "-m", "fast", "stop")
}

func (c *Cluster) cmd(ctx context.Context, tool string, args ...string) error {
	argv := append(append(append([]string(nil), c.runas...), filepath.Join(c.bindir, tool)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// freePort returns a TCP port on host that was free a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
