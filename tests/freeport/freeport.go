// Package freeport picks TCP ports for the servers tests start as
// processes of their own, which must be told their port before they
// listen.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Port returns a port on host that was free a moment ago and is not in
// taken. It is drawn below the kernel's ephemeral range: a port the
// kernel hands out for "host:0" may be handed out again, before the
// server that was told it binds it, to any listener asking for "any
// port" (a nats-server's monitor, say) or to an outgoing connection.
func Port(host string, taken ...int) (int, error) {
	low := ephemeralLow()
	var last error
	for range 200 {
		p := 10000 + rand.IntN(low-10000)
		if slices.Contains(taken, p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port on %s below %d: %v", host, low, last)
}

// ephemeralLow is the first port of the kernel's ephemeral range
// (Linux's default where it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				low = v
			}
		}
	}
	return low
}
