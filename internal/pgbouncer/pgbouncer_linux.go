package pgbouncer

import (
	"os/exec"
	"syscall"
)

// asUser makes cmd run as uid and gid (when not -1: it refuses to run as
// root), and end with the process that started it, so that a test binary
// killed in the middle leaves no PgBouncer behind. The credentials are set
// before the parent-death signal, which a change of user would clear.
func asUser(cmd *exec.Cmd, uid, gid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if uid >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
}
