package workflow

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
)

// ParallelMode says how Parallel treats the branches' errors.
type ParallelMode int

const (
	// CollectAll lets every branch run to its end and returns the errors of
	// all the branches that failed, joined (errors.Join).
	CollectAll ParallelMode = iota
	// FailFast cancels the other branches as soon as one fails and returns
	// that first error. A cancelled branch's Context is done; its step in
	// flight is not recorded (it runs again if a later execution gets
	// there), and its Sleep, WaitForEvent or Get returns the cancellation.
	FailFast
)

// errBranchCancelled is the cause of a FailFast branch's cancellation.
var errBranchCancelled = errors.New("workflow: parallel branch cancelled: another branch failed")

// Parallel runs fns concurrently, each on its own goroutine with a Context
// of its own, and returns when all of them have returned (see ParallelMode
// for errors).
//
// Branches call Step, Sleep, WaitForEvent, StartChild and Get (and Parallel)
// like the workflow function does; each step is memoized on its own, by its
// id, which must be unique within the run and must not depend on timing
// (derive it from the branch's index or data, never from which branch got
// somewhere first). Their reports go out concurrently. Results come back
// through the branches' closures.
//
// A branch that must wait (a sleep, an event, children, a long step retry
// backoff) parks; once no branch can go on, the run is suspended until the
// earliest thing any parked branch waits for, and the next execution
// replays every branch: finished branches return their memoized results at
// once and the others go on from where they waited.
//
// A branch that panics fails with a *PanicError. Parallel with no fns
// returns nil.
func Parallel(ctx Context, mode ParallelMode, fns ...func(ctx Context) error) error {
	ex := ctx.execution()
	if len(fns) == 0 {
		return nil
	}
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ex.mu.Lock()
	if ex.state != stateRunning {
		ex.mu.Unlock()
		panic(errExit)
	}
	// The caller stops running workflow code; the branches start.
	ex.active += len(fns) - 1
	remaining := len(fns)
	ex.mu.Unlock()

	var (
		wg    sync.WaitGroup
		errs  = make([]error, len(fns))
		first error
		once  sync.Once
	)
	wg.Add(len(fns))
	for i, fn := range fns {
		go func() {
			defer wg.Done()
			err, exited := ex.branch(&wfContext{Context: gctx, ex: ex}, fn)
			if exited {
				// Parked or abandoned: the execution is over and its
				// accounting no longer matters.
				return
			}
			errs[i] = err
			if err != nil && mode == FailFast {
				once.Do(func() {
					first = err
					cancel(errBranchCancelled)
				})
			}
			ex.mu.Lock()
			remaining--
			if remaining > 0 {
				ex.active--
			} // else the last branch hands its turn back to the caller
			suspend := ex.decideLocked()
			ex.mu.Unlock()
			if suspend {
				ex.suspendAll()
			}
		}()
	}
	wg.Wait()
	ex.mu.Lock()
	state := ex.state
	ex.mu.Unlock()
	if state != stateRunning {
		panic(errExit)
	}
	if ex.ctx.Err() != nil {
		ex.abandon(context.Cause(ex.ctx))
	}
	if mode == FailFast {
		return first
	}
	return errors.Join(errs...)
}

// branch runs one Parallel branch. exited reports that it ended by the exit
// signal (the run was suspended or the execution abandoned).
func (ex *execution) branch(ctx *wfContext, fn func(Context) error) (err error, exited bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(*exitSignal); ok {
				err, exited = nil, true
				return
			}
			err = &PanicError{Value: r, Stack: string(debug.Stack())}
		}
	}()
	if fn == nil {
		return errors.New("workflow: nil parallel branch"), false
	}
	return fn(ctx), false
}
