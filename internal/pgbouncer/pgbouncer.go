// Package pgbouncer runs PgBouncer as a process of its own in front of a
// Postgres server, on a free loopback port, in transaction mode unless told
// otherwise: the connection pooler production puts between the services
// and Postgres. The tests run the services through it, and `kagzi bench
// --pgbouncer` measures them through it. Debian's package (1.18 in
// bookworm, scripts/ensure-pgbouncer.sh installs it) is the oldest
// PgBouncer Kagzi supports: it has no prepared statements in transaction
// mode, and it refuses every startup parameter it does not know.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DebianBinary is where Debian's pgbouncer package installs the binary.
const DebianBinary = "/usr/sbin/pgbouncer"

// ErrNotInstalled is wrapped by Binary's error when no pgbouncer is found.
var ErrNotInstalled = errors.New("pgbouncer is not installed")

// Binary returns the pgbouncer binary to run: DebianBinary, else the
// first on the PATH.
func Binary() (string, error) {
	if _, err := os.Stat(DebianBinary); err == nil {
		return DebianBinary, nil
	}
	p, err := exec.LookPath("pgbouncer")
	if err != nil {
		return "", fmt.Errorf("%w at %s nor on the PATH (scripts/ensure-pgbouncer.sh installs Debian's)", ErrNotInstalled, DebianBinary)
	}
	return p, nil
}

// Options configure a PgBouncer.
type Options struct {
	// Server is a URL of the Postgres server to pool connections to: its
	// host, port and user are used. Every database name a client asks
	// for is passed on to the server as it is (a wildcard entry).
	Server string
	// PoolMode is transaction (default), session or statement.
	PoolMode string
	// PoolSize is the number of server connections per database and user
	// (default_pool_size; default 20).
	PoolSize int
	// MaxClientConn is the most client connections (default 2000).
	MaxClientConn int
	// Settings are extra lines of the [pgbouncer] section (name = value).
	Settings []string
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	cmd  *exec.Cmd
	dir  string
	addr string
	done chan struct{}
	stop sync.Once
}

// Start starts PgBouncer (Binary) as configured by o and returns once it
// accepts connections.
func Start(ctx context.Context, o Options) (*Bouncer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	srv, err := pgconn.ParseConfig(o.Server)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: server url: %w", err)
	}
	if o.PoolMode == "" {
		o.PoolMode = "transaction"
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 20
	}
	if o.MaxClientConn <= 0 {
		o.MaxClientConn = 2000
	}
	// Its own directory, readable by the user it runs as (it refuses to
	// run as root).
	dir, err := os.MkdirTemp("", "kagzi-pgbouncer-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgbouncer: running as root needs a postgres user to run it as: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	// auth_type trust still wants every user in the auth file.
	auth := fmt.Sprintf("%q \"\"\n", srv.User)
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(auth), 0o644); err != nil {
		return nil, err
	}
	var lastErr error
	// The port was free a moment ago; another process may take it first.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		b := &Bouncer{dir: dir, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{})}
		conf := b.config(srv, port, o)
		if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(conf), 0o644); err != nil {
			return nil, err
		}
		b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
		asUser(b.cmd, uid, gid)
		b.cmd.Stdout, b.cmd.Stderr = nil, nil // it logs to its file
		if err := b.cmd.Start(); err != nil {
			return nil, fmt.Errorf("pgbouncer: start: %w", err)
		}
		go func() {
			_ = b.cmd.Wait()
			close(b.done)
		}()
		if lastErr = b.waitReady(ctx); lastErr == nil {
			ok = true
			return b, nil
		}
		b.kill()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// config is the pgbouncer.ini of b.
func (b *Bouncer) config(srv *pgconn.Config, port int, o Options) string {
	var c strings.Builder
	fmt.Fprintf(&c, "[databases]\n* = host=%s port=%d\n\n[pgbouncer]\n", srv.Host, srv.Port)
	for _, kv := range [][2]string{
		{"listen_addr", "127.0.0.1"},
		{"listen_port", strconv.Itoa(port)},
		{"unix_socket_dir", ""},
		{"auth_type", "trust"},
		{"auth_file", filepath.Join(b.dir, "users.txt")},
		{"pool_mode", o.PoolMode},
		{"default_pool_size", strconv.Itoa(o.PoolSize)},
		{"max_client_conn", strconv.Itoa(o.MaxClientConn)},
		{"logfile", b.LogPath()},
		// After a failed server login PgBouncer refuses every client login
		// for server_login_retry (15 s by default): 1 s lets the services
		// come back with the database, as docs/deployment.md advises.
		{"server_login_retry", "1"},
		{"log_connections", "0"},
		{"log_disconnections", "0"},
	} {
		fmt.Fprintf(&c, "%s = %s\n", kv[0], kv[1])
	}
	for _, kv := range o.Settings {
		fmt.Fprintln(&c, kv)
	}
	return c.String()
}

// waitReady waits until b accepts connections, or fails once it exits.
func (b *Bouncer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-b.done:
			return fmt.Errorf("pgbouncer exited at start: %s", b.LogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer: not accepting connections at %s after 10 s: %s", b.addr, b.LogTail())
		}
	}
}

// Addr is where PgBouncer listens (host:port).
func (b *Bouncer) Addr() string { return b.addr }

// PID is the PgBouncer process's id.
func (b *Bouncer) PID() int { return b.cmd.Process.Pid }

// LogPath is PgBouncer's log file.
func (b *Bouncer) LogPath() string { return filepath.Join(b.dir, "pgbouncer.log") }

// LogTail is the end of PgBouncer's log, for error messages.
func (b *Bouncer) LogTail() string {
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// URL returns direct, a URL of the server, with its host and port
// replaced by PgBouncer's: the same database and user, through the
// pooler.
func (b *Bouncer) URL(direct string) (string, error) {
	u, err := url.Parse(direct)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("pgbouncer: %q is not a postgres:// URL", direct)
	}
	u.Host = b.addr
	return u.String(), nil
}

// Stop ends PgBouncer at once (SIGTERM: every connection is closed) and
// removes its directory; safe to call twice.
func (b *Bouncer) Stop() {
	b.stop.Do(func() {
		b.kill()
		_ = os.RemoveAll(b.dir)
	})
}

func (b *Bouncer) kill() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
