//go:build !linux

package pgbouncer

import "os/exec"

// asUser makes cmd run as the user of uid (when not -1: it refuses to run
// as root), with PgBouncer's own switch.
func asUser(cmd *exec.Cmd, uid, _ int) {
	if uid < 0 {
		return
	}
	cmd.Args = append(cmd.Args[:1], append([]string{"-u", "postgres"}, cmd.Args[1:]...)...)
}
