package measure

import (
	"os"
	"testing"
	"time"
)

func TestProcTimesOfSelf(t *testing.T) {
	// Burn some CPU so the reading is above one clock tick.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	self, _, ppid, err := procTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self <= 0 {
		t.Errorf("own CPU %v after 50 ms of work", self)
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
