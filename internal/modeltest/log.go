package modeltest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// DirEnv names the directory where a worker process's interpreter logs
// its step invocations (one file per process, LogPrefix<pid>.log). Unset,
// LogFromEnv logs nothing.
const DirEnv = "KAGZI_MODEL_DIR"

// LogPrefix starts the name of each process's invocation log.
const LogPrefix = "model-"

// ExecutionID stands for the step id in the log record of an execution of
// a run (one call of the workflow function; its attempt is ctx.Attempt()).
const ExecutionID = "@exec"

// Invocation is one call of a step function, or an execution of a run
// (StepID ExecutionID).
type Invocation struct {
	Key, RunID, StepID string
	Attempt            int
	PID                int
}

// InvocationLog records step function invocations. A nil InvocationLog
// records nothing.
type InvocationLog interface {
	Invoked(key, runID, stepID string, attempt int)
}

// MemLog is an in-memory InvocationLog (in-process workers).
type MemLog struct {
	mu  sync.Mutex
	all []Invocation
}

// Invoked implements InvocationLog.
func (l *MemLog) Invoked(key, runID, stepID string, attempt int) {
	l.mu.Lock()
	l.all = append(l.all, Invocation{Key: key, RunID: runID, StepID: stepID, Attempt: attempt, PID: os.Getpid()})
	l.mu.Unlock()
}

// All returns the invocations so far.
func (l *MemLog) All() []Invocation {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Invocation(nil), l.all...)
}

// fileLog appends one line per invocation to this process's file: each
// line is one write(2) to a file opened O_APPEND, so a SIGKILL loses no
// line already written.
type fileLog struct {
	f   *os.File
	pid int
}

func (l *fileLog) Invoked(key, runID, stepID string, attempt int) {
	// A failed write shows up as a missing invocation: the check fails.
	_, _ = l.f.WriteString(fmt.Sprintf("I %s %s %s %d %d\n", key, runID, stepID, attempt, l.pid))
}

// LogFromEnv returns the invocation log of this process: a file in the
// directory DirEnv names, or nil when it is unset.
func LogFromEnv() (InvocationLog, error) {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return nil, nil
	}
	pid := os.Getpid()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s%d.log", LogPrefix, pid)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("modeltest: invocation log: %w", err)
	}
	return &fileLog{f: f, pid: pid}, nil
}

// nopLog stands for a nil InvocationLog.
type nopLog struct{}

func (nopLog) Invoked(string, string, string, int) {}

// ReadLogs reads every process's invocation log in dir. A line cut short
// by a SIGKILL is not counted and not an error.
func ReadLogs(dir string) ([]Invocation, error) {
	files, err := filepath.Glob(filepath.Join(dir, LogPrefix+"*.log"))
	if err != nil {
		return nil, err
	}
	var out []Invocation
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 6 || fs[0] != "I" {
				continue
			}
			a, err1 := strconv.Atoi(fs[4])
			p, err2 := strconv.Atoi(fs[5])
			if err1 != nil || err2 != nil {
				continue
			}
			out = append(out, Invocation{Key: fs[1], RunID: fs[2], StepID: fs[3], Attempt: a, PID: p})
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
