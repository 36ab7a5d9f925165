package measure

import (
	"os"
	"testing"
	"time"
)

func TestProcTimesOfSelf(t *testing.T) {
	// Burn CPU until the reading is above one clock tick: on a loaded
	// machine 50 ms of wall time may be less than a tick of CPU.
	var self time.Duration
	var ppid int
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		for x, until := 0, time.Now().Add(50*time.Millisecond); time.Now().Before(until); x++ {
			_ = x * x
		}
		if self, _, ppid, err = procTimes(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if self > 0 || time.Now().After(deadline) {
			break
		}
	}
	if self <= 0 {
		t.Errorf("own CPU %v after 10 s of work", self)
	}
	if ppid != os.Getppid() {
		t.Errorf("parent %d, want %d", ppid, os.Getppid())
	}
	if _, _, _, err := procTimes(-1); err == nil {
		t.Error("a process that does not exist must be an error")
	}
	if tree := treeTimes(os.Getpid()); tree < self {
		t.Errorf("tree %v below the process's own %v", tree, self)
	}
}
