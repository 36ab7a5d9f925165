package pgsession_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/store/pgsession"
	"github.com/kagzi/kagzi/tests/testdb"
)

// TestLockConnDetectsDeadPeers checks that a leader's dedicated connection
// asks the server to end the session of a silent client within seconds and
// lets a URL override a server setting. (tests/e2e's TestFailoverNetworkCut measures the effect.)
func TestLockConnDetectsDeadPeers(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	show := func(conn *pgx.Conn, name string) string {
		t.Helper()
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}

	conn := lockConn(t, ctx, url)
	if _, ok := conn.PgConn().Conn().(*net.TCPConn); !ok {
		t.Skipf("the test database is not reached over TCP (%T): the settings do not apply", conn.PgConn().Conn())
	}
	// In their base units: seconds, seconds, probes, milliseconds.
	want := map[string]string{"tcp_keepalives_idle": "2", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "3", "tcp_user_timeout": "5000"}
	for name, v := range want {
		if got := show(conn, name); got != v {
			t.Errorf("server %s = %q, want %q", name, got, v)
		}
	}
	over := lockConn(t, ctx, url+"&tcp_user_timeout=7000")
	if got := show(over, "tcp_user_timeout"); got != "7000" {
		t.Errorf("tcp_user_timeout set in the URL: server has %q, want 7000", got)
	}
}

// lockConn opens a leader's dedicated connection to url, closed when t
// ends.
func lockConn(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	cfg, err := pgsession.LockConnConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestLockConnMultiHost checks that a leader's dedicated connection keeps
// what a multi-host URL asks for, though it replaces the dialer: every
// host is tried in turn (the first one here refuses), and each session is
// checked for target_session_attrs (tests/e2e's TestHAPostgresOldPrimaryReturns
// has a read-only host first).
func TestLockConnMultiHost(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(base.Host, "/") {
		t.Skipf("the test database is reached over a Unix socket (%s): no second TCP host to list", base.Host)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	multi := fmt.Sprintf("postgres://%s@127.0.0.1:%d,%s/%s?sslmode=disable&target_session_attrs=read-write",
		base.User, gone, net.JoinHostPort(base.Host, strconv.Itoa(int(base.Port))), base.Database)
	cfg, err := pgsession.LockConnConfig(multi)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Fallbacks) != 1 || cfg.ValidateConnect == nil {
		t.Fatalf("%d fallback hosts and a session check %v, want 1 and one", len(cfg.Fallbacks), cfg.ValidateConnect != nil)
	}
	conn := lockConn(t, ctx, multi)
	if got := conn.PgConn().Conn().RemoteAddr().(*net.TCPAddr).Port; got != int(base.Port) {
		t.Errorf("connected to port %d, want the second host's %d", got, base.Port)
	}
}
