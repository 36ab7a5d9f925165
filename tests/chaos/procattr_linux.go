//go:build linux

package chaos

import "syscall"

// childAttr puts a child in its own process group (a Ctrl-C reaches the
// chaos command only, which then stops its children in order) and has the
// kernel kill it if the chaos command dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
