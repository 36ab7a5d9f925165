package modeltest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
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

// InvocationLog records step function invocations, and when each
// execution of a run began and ended. A nil InvocationLog records nothing.
type InvocationLog interface {
	Invoked(key, runID, stepID string, attempt int)
	Executed(key, runID string, begin, end time.Time)
}

// Execution is one execution of a run (a call of the workflow function, up
// to its return or suspension): it lies within the time the run held a
// worker slot, RUNNING, so executions of a concurrency key that overlap
// were RUNNING at once.
type Execution struct {
	Key, RunID string
	Begin, End time.Time
}

// MemLog is an in-memory InvocationLog (in-process workers).
type MemLog struct {
	mu    sync.Mutex
	all   []Invocation
	execs []Execution
}

// Invoked implements InvocationLog.
func (l *MemLog) Invoked(key, runID, stepID string, attempt int) {
	l.mu.Lock()
	l.all = append(l.all, Invocation{Key: key, RunID: runID, StepID: stepID, Attempt: attempt, PID: os.Getpid()})
	l.mu.Unlock()
}

// Executed implements InvocationLog.
func (l *MemLog) Executed(key, runID string, begin, end time.Time) {
	l.mu.Lock()
	l.execs = append(l.execs, Execution{Key: key, RunID: runID, Begin: begin, End: end})
	l.mu.Unlock()
}

// Executions returns the executions so far.
func (l *MemLog) Executions() []Execution {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Execution(nil), l.execs...)
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

func (l *fileLog) Executed(key, runID string, begin, end time.Time) {
	_, _ = l.f.WriteString(fmt.Sprintf("X %s %s %d %d %d\n", key, runID, begin.UnixNano(), end.UnixNano(), l.pid))
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

func (nopLog) Executed(string, string, time.Time, time.Time) {}

// ReadExecutions reads the executions every process logged in dir (see
// ReadLogs).
func ReadExecutions(dir string) ([]Execution, error) {
	var out []Execution
	err := readLines(dir, func(fs []string) {
		if len(fs) != 6 || fs[0] != "X" {
			return
		}
		b, err1 := strconv.ParseInt(fs[3], 10, 64)
		e, err2 := strconv.ParseInt(fs[4], 10, 64)
		if err1 == nil && err2 == nil {
			out = append(out, Execution{Key: fs[1], RunID: fs[2], Begin: time.Unix(0, b), End: time.Unix(0, e)})
		}
	})
	return out, err
}

// readLines calls fn with the fields of every line of every process's log
// in dir.
func readLines(dir string, fn func([]string)) error {
	files, err := filepath.Glob(filepath.Join(dir, LogPrefix+"*.log"))
	if err != nil {
		return err
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fn(strings.Fields(sc.Text()))
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// ReadLogs reads every process's invocation log in dir. A line cut short
// by a SIGKILL is not counted and not an error.
func ReadLogs(dir string) ([]Invocation, error) {
	var out []Invocation
	err := readLines(dir, func(fs []string) {
		if len(fs) != 6 || fs[0] != "I" {
			return
		}
		a, err1 := strconv.Atoi(fs[4])
		p, err2 := strconv.Atoi(fs[5])
		if err1 == nil && err2 == nil {
			out = append(out, Invocation{Key: fs[1], RunID: fs[2], StepID: fs[3], Attempt: a, PID: p})
		}
	})
	return out, err
}
