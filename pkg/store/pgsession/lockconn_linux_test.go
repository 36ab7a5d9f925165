package pgsession_test

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kagzi/kagzi/tests/testdb"
)

// TestLockConnClientSocket checks that the client end of a leader's
// dedicated connection gives up on a silent server as the server does.
func TestLockConnClientSocket(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := lockConn(t, ctx, url)
	tcp, ok := conn.PgConn().Conn().(*net.TCPConn)
	if !ok {
		t.Skipf("the test database is not reached over TCP (%T)", conn.PgConn().Conn())
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var userTimeout, idle, interval, probes int
	var errs [4]error
	_ = raw.Control(func(fd uintptr) {
		userTimeout, errs[0] = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		idle, errs[1] = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		interval, errs[2] = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
		probes, errs[3] = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("getsockopt: %v", err)
		}
	}
	if userTimeout != 5000 || idle != 2 || interval != 1 || probes != 3 {
		t.Errorf("client socket: TCP_USER_TIMEOUT %d ms, keepalive idle %d s, interval %d s, probes %d; want 5000, 2, 1, 3",
			userTimeout, idle, interval, probes)
	}
}
