//go:build !unix

package chaos

import "syscall"

// childAttr: no process groups here.
func childAttr() *syscall.SysProcAttr { return nil }
