//go:build !linux

package testnats

import "os/exec"

// orphanProof does nothing where the kernel has no parent-death signal:
// t.Cleanup stops the server.
func orphanProof(*exec.Cmd) {}
