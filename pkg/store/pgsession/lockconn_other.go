//go:build !linux

package pgsession

import (
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist: the
// keepalive probe count bounds detection alone there.
func setUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
