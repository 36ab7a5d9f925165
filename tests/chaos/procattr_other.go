//go:build unix && !linux

package chaos

import "syscall"

// childAttr puts a child in its own process group (a Ctrl-C reaches the
// chaos command only, which then stops its children in order).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
