// Package workflow is what workflow code imports: typed declarations of
// workflows ([New], [Ref]), the Context a run executes in, durable steps
// ([Step]) memoized across executions and retried under a policy
// ([WithRetry], [WithStepTimeout]), durable sleep ([Sleep], [SleepUntil]),
// events ([WaitForEvent], [DrainEvents]), wait tokens completed from outside
// ([NewWaitToken], [WaitForToken]), updates the caller waits for ([NewUpdate],
// [Update.Handle]), child workflows ([Ref.Child], [StartChild],
// [Child], [ChildAll]), parallel branches ([Parallel]), recorded values
// ([Now], [SideEffect]), patching of running workflows ([Version]),
// [ContinueAsNew], and the error helpers that steer retries
// ([NonRetryable], [IsNonRetryable], [ErrorType]).
//
// It also owns the execution semantics of one delivery of a run: replay by
// memoization, detection of non-determinism, suspension, and the report
// each outcome produces. The engine drives an execution through an internal
// package (the worker over NATS, package workflowtest in-process), so that
// driver is not part of the surface applications program against.
// Unit-test workflows with package workflowtest.
//
// # Replay
//
// A workflow function re-runs from the top every time its run is delivered
// (after a crash, a retry, a sleep). Each step is named by an id unique
// within the run; a step whose latest attempt is recorded as completed
// returns its recorded output without running again. Workflow code must
// therefore be deterministic between steps: the same input and the same
// step results must lead to the same sequence of step ids. Side effects,
// clocks and randomness belong inside steps.
//
// Steps run at least once; their recorded result is exactly once.
//
// # Events and the end of a run
//
// An event is received once, by the WaitForEvent or DrainEvents that takes
// it. The engine does not let a run end (complete or continue as new) past
// an event it has not seen: if events of a name the execution waited for
// or drained arrived after the run was delivered to it and are still
// unconsumed when it returns, the end is refused and the run executes
// again at once with them, as Temporal retries a workflow task that new
// signals overtook. The replay takes the same path up to the end of the
// recorded history; there a DrainEvents takes what is pending (see
// DrainEvents). So a workflow that drains the names it collects right
// before it returns receives every event sent while it was live:
//
//	first, _ := workflow.WaitForEvent[Item](ctx, "add", 0)
//	rest, _ := workflow.DrainEvents[Item](ctx, "add")
//	return append([]Item{first}, rest...), nil
//
// An event a workflow leaves (it never waits for or drains its name, or
// not after it came) stays with the finished run, shown as unreceived by
// `kagzi run show` and the console.
//
// # Suspension
//
// Some calls end the current execution early: Sleep, WaitForEvent without
// an event, Get or ChildAll with children still running, and Step when a
// retry backoff is longer than the worker waits in place. They report to
// the engine that the run is suspended — holding no worker slot and no
// lease — and then unwind the workflow goroutine with an internal panic
// that the runtime recovers and does not report as a failure. Workflow code
// must therefore not swallow panics it does not own: a recover() in
// workflow code that discards unknown panic values keeps the function
// running, although the runtime still treats the execution as suspended
// and ignores what the function returns. The engine delivers the run again
// when what it waits for is there, and the replay goes on from there.
//
// Call the functions of this package only from the goroutine that runs the
// workflow function, or from the branches of Parallel (each with the
// Context it was given). In Parallel, a branch that must wait parks, and
// the run is suspended once no branch can go on, until the earliest thing
// any of them waits for.
//
// # Retries
//
// A failed step is retried under its policy (default retry.Default(); see
// WithRetry and Step); a step that exhausts its attempts returns its last
// error to the workflow. A workflow function that returns an error fails
// the attempt of the run, which is retried under the run's policy (set when
// it is started) with a fresh step budget, or fails for good.
package workflow
