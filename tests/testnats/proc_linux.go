package testnats

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill the server when the test binary dies,
// however it dies (a panic, a test timeout, a signal), before t.Cleanup
// could.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
