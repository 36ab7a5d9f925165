package testflows

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/modeltest"
)

// The workflow `kagzi chaos` drives (tests/chaos). It is an ordinary
// workflow of memoized steps with a durable sleep and an event wait; what
// makes it a probe is that, when KAGZI_CHAOS_DIR is set, every execution
// and every step invocation is also logged to a file outside the database
// that the chaos checker compares with what the database recorded.

// ChaosDirEnv names the directory the Chaos workflow logs to. Unset (the
// default), Chaos writes nothing.
const ChaosDirEnv = "KAGZI_CHAOS_DIR"

// ChaosLogPrefix starts the name of each worker process's log in the
// chaos directory: steps-<pid>.log.
const ChaosLogPrefix = "steps-"

// ChaosEventName is the event a Chaos run with Event set waits for.
const ChaosEventName = "go"

// Record kinds of the chaos log. A line is
//
//	X <unix ns> <run id> <exec> <pid> <run attempt>       an execution began (the workflow function was called)
//	Y <unix ns> <run id> <exec> <pid> 0                   the execution ended: returned, suspended or abandoned
//	B <unix ns> <run id> <exec> <pid> <step id> <attempt> a step function began
//	E <unix ns> <run id> <exec> <pid> <step id> <attempt> the step function's work is done
//
// where exec is a random id of the execution (one call of the workflow
// function in one process). Each line is one write(2) to a file opened
// O_APPEND, so a SIGKILL loses no line already written.
const (
	ChaosExecBegin = 'X'
	ChaosExecEnd   = 'Y'
	ChaosStepBegin = 'B'
	ChaosStepEnd   = 'E'
)

// ChaosInput is the input of Chaos.
type ChaosInput struct {
	// N numbers the run (the driver's index; 0 for scheduled runs).
	N int `json:"n"`
	// Steps is the number of FUNCTION steps, s1…sN (default 5).
	Steps int `json:"steps,omitempty"`
	// WorkMaxMS bounds each step's simulated work: a random 0 to WorkMaxMS
	// milliseconds (default 20; negative: none).
	WorkMaxMS int `json:"work_max_ms,omitempty"`
	// SleepMS, if positive, adds a durable sleep "nap" after step 2.
	SleepMS int `json:"sleep_ms,omitempty"`
	// Event adds a wait for the event ChaosEventName after step 3; its
	// payload must be a ChaosEvent with the run's N.
	Event bool `json:"event,omitempty"`
	// EventTimeoutMS bounds the wait (default 10 minutes).
	EventTimeoutMS int64 `json:"event_timeout_ms,omitempty"`
}

// ChaosStep is the output of every FUNCTION step of Chaos: who ran it.
type ChaosStep struct {
	Exec    string `json:"exec"`
	PID     int    `json:"pid"`
	Attempt int    `json:"attempt"`
}

// ChaosEvent is the payload of the event a Chaos run waits for.
type ChaosEvent struct {
	N int `json:"n"`
}

// ChaosOutput is the output of Chaos.
type ChaosOutput struct {
	// Exec is the execution that completed the run.
	Exec string `json:"exec"`
	// Seen is the exec of each step's result as that execution saw it
	// (run or replayed), in step order.
	Seen []string `json:"seen"`
}

// ChaosStepID is the id of the k-th (from 1) FUNCTION step of Chaos.
func ChaosStepID(k int) string { return "s" + strconv.Itoa(k) }

// FormatChaosRecord formats one chaos log line (see the record kinds).
func FormatChaosRecord(kind byte, at time.Time, run, exec string, pid int, step string, attempt int) string {
	var b strings.Builder
	b.Grow(96)
	b.WriteByte(kind)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatInt(at.UnixNano(), 10))
	b.WriteByte(' ')
	b.WriteString(run)
	b.WriteByte(' ')
	b.WriteString(exec)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(pid))
	if step != "" {
		b.WriteByte(' ')
		b.WriteString(step)
	}
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(attempt))
	b.WriteByte('\n')
	return b.String()
}

// chaosLog is this process's chaos log; nil when KAGZI_CHAOS_DIR is unset.
type chaosLog struct {
	f   *os.File
	err error
	pid int
}

var (
	chaosOnce sync.Once
	chaosLg   *chaosLog
)

func openChaosLog() *chaosLog {
	chaosOnce.Do(func() {
		dir := os.Getenv(ChaosDirEnv)
		if dir == "" {
			return
		}
		pid := os.Getpid()
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s%d.log", ChaosLogPrefix, pid)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		chaosLg = &chaosLog{f: f, err: err, pid: pid}
	})
	return chaosLg
}

// write appends one record; nothing when the log is off.
func (l *chaosLog) write(kind byte, run, exec, step string, attempt int) error {
	if l == nil {
		return nil
	}
	if l.err != nil {
		return fmt.Errorf("chaos log: %w", l.err)
	}
	if _, err := l.f.WriteString(FormatChaosRecord(kind, time.Now(), run, exec, l.pid, step, attempt)); err != nil {
		return fmt.Errorf("chaos log: %w", err)
	}
	return nil
}

func (l *chaosLog) pidOr0() int {
	if l == nil {
		return os.Getpid()
	}
	return l.pid
}

// Chaos runs Steps steps of random short work, with a durable sleep after
// step 2 and an event wait after step 3 when its input asks for them, and
// returns which execution ran or replayed what. `kagzi chaos` runs
// thousands of them while it kills processes, and checks the outcome.
func Chaos(ctx workflow.Context, in ChaosInput) (ChaosOutput, error) {
	lg := openChaosLog()
	run := ctx.RunID().String()
	exec := strconv.FormatUint(rand.Uint64(), 36)
	if err := lg.write(ChaosExecBegin, run, exec, "", ctx.Attempt()); err != nil {
		return ChaosOutput{}, err
	}
	// Runs when the function returns and when a suspended or abandoned
	// execution unwinds; a killed process writes nothing.
	defer func() { _ = lg.write(ChaosExecEnd, run, exec, "", 0) }()
	steps := in.Steps
	if steps <= 0 {
		steps = 5
	}
	work := in.WorkMaxMS
	if work == 0 {
		work = 20
	}
	out := ChaosOutput{Exec: exec}
	for k := 1; k <= steps; k++ {
		id := ChaosStepID(k)
		got, err := workflow.Step(ctx, id, func(sctx context.Context) (ChaosStep, error) {
			info, _ := workflow.StepInfoFrom(sctx)
			if err := lg.write(ChaosStepBegin, run, exec, id, info.Attempt); err != nil {
				return ChaosStep{}, err
			}
			if work > 0 {
				t := time.NewTimer(time.Duration(rand.IntN(work+1)) * time.Millisecond)
				select {
				case <-sctx.Done():
					t.Stop()
					return ChaosStep{}, context.Cause(sctx)
				case <-t.C:
				}
			}
			if err := lg.write(ChaosStepEnd, run, exec, id, info.Attempt); err != nil {
				return ChaosStep{}, err
			}
			return ChaosStep{Exec: exec, PID: lg.pidOr0(), Attempt: info.Attempt}, nil
		})
		if err != nil {
			return out, err
		}
		out.Seen = append(out.Seen, got.Exec)
		if k == 2 && in.SleepMS > 0 {
			if err := workflow.Sleep(ctx, "nap", time.Duration(in.SleepMS)*time.Millisecond); err != nil {
				return out, err
			}
		}
		if k == 3 && in.Event {
			timeout := 10 * time.Minute
			if in.EventTimeoutMS > 0 {
				timeout = time.Duration(in.EventTimeoutMS) * time.Millisecond
			}
			ev, err := workflow.WaitForEvent[ChaosEvent](ctx, ChaosEventName, timeout)
			if err != nil {
				return out, workflow.NonRetryable(err)
			}
			if ev.N != in.N {
				return out, workflow.NonRetryable(fmt.Errorf("chaos: event for run %d received by run %d", ev.N, in.N))
			}
		}
	}
	return out, nil
}

// registerChaos registers Chaos on w (Register calls it).
func registerChaos(w *worker.Worker) error {
	if err := worker.Register(w, "Chaos", Chaos); err != nil {
		return errors.Join(errors.New("register Chaos"), err)
	}
	return nil
}

// registerModel registers the model test's program interpreter
// (tests/modeltest), which `kagzi chaos --model` drives; it logs each
// step invocation to the directory named by modeltest.DirEnv, if set.
func registerModel(w *worker.Worker) error {
	log, err := modeltest.LogFromEnv()
	if err != nil {
		return err
	}
	if err := modeltest.Register(w, log); err != nil {
		return errors.Join(errors.New("register "+modeltest.WorkflowType), err)
	}
	return nil
}
