// Package pgcluster runs a throwaway Postgres cluster in a directory of its
// own on a free port, for what must not disturb the machine's server: the
// chaos run restarts its cluster, the failover test listens on an address
// the system server does not, the Postgres failover tests crash a primary
// and promote its streaming standby (Standby, Promote). As scripts/ensure-postgres.sh does: initdb and
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
	"syscall"
	"time"

	"github.com/kagzi/kagzi/tests/freeport"
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
	// defaults, so they may turn durability back on (Durable).
	Settings []string
	// Port is the port to listen on (default a free one): a standby that
	// takes the place of a cluster gone listens where it did.
	Port int
}

// Durable are the settings of a primary whose commits must survive its
// crash and reach a standby: the defaults turn durability off.
var Durable = []string{"fsync=on", "full_page_writes=on", "synchronous_commit=on", "wal_level=replica"}

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
	c, err := newCluster(bindir, dir, host, o.Port)
	if err != nil {
		return nil, err
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
	if err := c.start(ctx, o.Settings); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster prepares dir for a cluster on host and port (a free one if
// 0), owned by the postgres user when root.
func newCluster(bindir, dir, host string, port int) (*Cluster, error) {
	if port == 0 {
		var err error
		if port, err = freePort(host); err != nil {
			return nil, err
		}
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
	return c, nil
}

// start starts the server of c's data directory with the defaults, then
// settings.
func (c *Cluster) start(ctx context.Context, settings []string) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c max_connections=300 -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
		c.port, c.dir, c.host)
	for _, kv := range settings {
		opts += " -c " + kv
	}
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", c.LogPath(), "-w", "-t", "60",
		"-o", opts, "start")
}

// StandbyOptions configure a standby.
type StandbyOptions struct {
	// Name is the standby's application_name on its primary, the name
	// synchronous_standby_names lists (default "standby").
	Name string
	// Port is the port to listen on (default a free one).
	Port int
	// Settings are extra server settings, as Options.Settings. The
	// standby does not inherit its primary's: a standby promoted with the
	// primary's synchronous_standby_names would wait for ever for a
	// standby of its own.
	Settings []string
}

// Standby creates a streaming standby of c under dir (created if missing):
// a base backup of c (pg_basebackup -R, which writes the connection to
// the primary into the standby's configuration), started on its own port.
// Its primary must let it in: initdb's defaults trust replication
// connections from the loopback.
func (c *Cluster) Standby(ctx context.Context, dir string, o StandbyOptions) (*Cluster, error) {
	if o.Name == "" {
		o.Name = "standby"
	}
	s, err := newCluster(c.bindir, dir, c.host, o.Port)
	if err != nil {
		return nil, err
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres application_name=%s", c.host, c.port, o.Name)
	if err := s.cmd(ctx, "pg_basebackup", "-D", filepath.Join(dir, "data"), "-d", conninfo,
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return nil, err
	}
	if err := s.start(ctx, o.Settings); err != nil {
		return nil, err
	}
	return s, nil
}

// Promote makes a standby a primary (pg_ctl promote) and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-w", "-t", "60", "promote")
}

// Kill is `pg_ctl stop -m immediate`: every server process quits at once,
// with no checkpoint, as in a crash; what was not flushed is gone.
func (c *Cluster) Kill(ctx context.Context) error {
	return c.cmd(ctx, "pg_ctl", "-D", filepath.Join(c.dir, "data"), "-w", "-t", "60", "-m", "immediate", "stop")
}

// Crash kills every process of the server at once (SIGKILL), as a power
// loss does: unlike Kill, no process sends anything more, not even the
// WAL a standby has not received yet. It returns once they are gone.
func (c *Cluster) Crash(ctx context.Context) error {
	pids, err := c.Processes()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if state, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); bytes.Contains(state, []byte(") Z ")) {
				break // a zombie of a parent of its own (runuser), gone
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// Process returns the id of the server process whose title names role
// (e.g. "walsender", "walreceiver", "checkpointer"), or an error if none
// does.
func (c *Cluster) Process(role string) (int, error) {
	pids, err := c.Processes()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids[1:] {
		title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(title, []byte(role)) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pgcluster: no %s process", role)
}

// Host is the address the cluster listens on.
func (c *Cluster) Host() string { return c.host }

// Port is the port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// Processes returns the process ids of the server: the postmaster and its
// children (backends, checkpointer, WAL writer...), e.g. to stop them
// all (SIGSTOP) as in an I/O stall.
func (c *Cluster) Processes() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "data", "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil, fmt.Errorf("pgcluster: postmaster.pid: %w", err)
	}
	pids := []int{pm}
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pm {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			pids = append(pids, pid)
		}
	}
	return pids, nil
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
func freePort(host string) (int, error) { return freeport.Port(host) }
