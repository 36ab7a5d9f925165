//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Ctrl-C on `make run`, on a terminal, reaches kagzi dev alone: it stops
// cleanly (exit 0) and so does make, rather than make dying of the same
// SIGINT with an error. The test runs the Makefile's own run target on a
// pseudo-terminal, with GO= a stand-in for go that plays `go run . dev`:
// it exits 0 when interrupted, as kagzi dev does (TestDevServesHealthAndMetrics
// and the dev commands' tests run kagzi dev itself).
func TestMakeRunInterruptedEndsCleanly(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	if os.Getenv("KAGZI_TEST_DATABASE_URL") == "" {
		t.Skip("make run finds a Postgres first (scripts/ensure-postgres.sh); set KAGZI_TEST_DATABASE_URL")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(stub, []byte(`#!/bin/bash
[[ "$3" == mod ]] && exit 0
trap 'echo "stub: interrupted, stopping"; exit 0' INT
echo "stub: running $*"
while :; do sleep 0.05; done
`), 0o755); err != nil {
		t.Fatal(err)
	}

	master, slave := openPTY(t)
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "run", "GO="+stub)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// make is the session leader of the terminal, as in a shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	out := &lockedBytes{}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "stub: running") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("make run never started kagzi dev's stand-in:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Ctrl-C, as typed: the terminal sends SIGINT to its foreground job.
	if _, err := master.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) || err != nil {
			t.Errorf("make run interrupted: %v, want exit 0\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("make run did not end after Ctrl-C:\n%s", out.String())
	}
	// The terminal may still hold the last lines when make has exited:
	// read until every process has closed it.
	select {
	case <-readDone:
	case <-time.After(10 * time.Second):
		t.Fatalf("the terminal stayed open after make ended:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stub: interrupted") || strings.Contains(out.String(), "***") {
		t.Errorf("the interrupt did not end kagzi dev's stand-in cleanly, or make complained:\n%s", out.String())
	}
}

// openPTY opens a pseudo-terminal pair, closed when t ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

type lockedBytes struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBytes) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
}

func (l *lockedBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
