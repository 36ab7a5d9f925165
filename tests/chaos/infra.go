package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
)

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
	// defaults: the server's default pings, not Kagzi's.
	defaults bool
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
		// 8 MiB payloads, and a frozen client closed within seconds, as
		// Kagzi's embedded server and compose run it (unless defaults).
		conf := filepath.Join(filepath.Dir(n.log), "nats.conf")
		body := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nmax_payload: %d\n", n.port, protocol.NATSMaxPayload)
		if !n.defaults {
			body += natsutil.ServerConfig()
		}
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
