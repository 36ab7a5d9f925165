package workflowtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/pkg/workflowtest"
)

type order struct {
	ID     string
	Amount int
}

type receipt struct {
	Charge   string
	Shipment int
	Approved bool
}

var (
	processOrder = workflow.New[order, receipt]("ProcessOrder")
	ship         = workflow.New[string, int]("Ship")
)

// processOrderFn charges (a step that fails twice), waits an hour, waits
// for an approval event (timing out after a day), and ships in a child.
func processOrderFn(ctx workflow.Context, o order) (receipt, error) {
	charge, err := workflow.Step(ctx, "charge", func(context.Context) (string, error) {
		return "", errors.New("the real charge must not run in a unit test")
	}, workflow.WithRetry(retry.Policy{MaxAttempts: 5, InitialInterval: time.Minute}))
	if err != nil {
		return receipt{}, err
	}
	if err := workflow.Sleep(ctx, "cool-off", time.Hour); err != nil {
		return receipt{}, err
	}
	approved, err := workflow.WaitForEvent[bool](ctx, "approval", 24*time.Hour)
	if err != nil && !errors.Is(err, workflow.ErrEventTimeout) {
		return receipt{}, err
	}
	n, err := ship.Child(ctx, "ship", o.ID)
	if err != nil {
		return receipt{}, err
	}
	return receipt{Charge: charge, Shipment: n, Approved: approved}, nil
}

func TestRunWithMocks(t *testing.T) {
	env := workflowtest.New()
	env.OnStepFunc("charge", func(attempt int) (any, error) {
		if attempt < 3 {
			return nil, errors.New("card network down")
		}
		return "ch-1", nil
	})
	env.SendEventAfter(3*time.Hour, "approval", true)
	workflowtest.OnChildOf(env, ship, func(id string) (int, error) { return len(id), nil })

	got, err := workflowtest.Run(env, processOrder, processOrderFn, order{ID: "o-123", Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got != (receipt{Charge: "ch-1", Shipment: 5, Approved: true}) {
		t.Fatalf("result %+v", got)
	}
	// Two backoffs (~1 min, ~2 min), the hour's sleep, then the event at 3 h.
	if el := env.Elapsed(); el != 3*time.Hour {
		t.Fatalf("virtual time %v, want 3h (the event's arrival)", el)
	}
	steps := env.Steps()
	if len(steps) != 4 || steps[0].ID != "charge" || steps[0].Attempts != 3 || steps[1].Kind != "SLEEP" ||
		steps[2].Kind != "EVENT" || steps[3].Kind != "CHILD" {
		t.Fatalf("history %+v", steps)
	}
}

func TestEventTimeoutAndChildFailure(t *testing.T) {
	env := workflowtest.New()
	env.OnStep("charge", "ch-2", nil)
	workflowtest.OnChildOf(env, ship, func(string) (int, error) { return 0, errors.New("no stock") })
	_, err := workflowtest.Run(env, processOrder, processOrderFn, order{ID: "o-9"})
	var re *workflowtest.RunError
	if !errors.As(err, &re) || re.Type != "ChildFailed" {
		t.Fatalf("run error %v, want the child's failure", err)
	}
	if el := env.Elapsed(); el != 25*time.Hour {
		t.Fatalf("virtual time %v, want 25h (sleep, then the day's timeout)", el)
	}
}

func TestBlockedAndMissingChild(t *testing.T) {
	wait := workflow.New[struct{}, string]("Wait")
	_, err := workflowtest.Run(workflowtest.New(), wait, func(ctx workflow.Context, _ struct{}) (string, error) {
		return workflow.WaitForEvent[string](ctx, "never", 0)
	}, struct{}{})
	if !errors.Is(err, workflowtest.ErrBlocked) {
		t.Fatalf("wait without an event: %v", err)
	}
	env := workflowtest.New()
	env.OnStep("charge", "ch", nil)
	env.SendEvent("approval", true)
	if _, err := workflowtest.Run(env, processOrder, processOrderFn, order{}); err == nil {
		t.Fatal("a child without an answer ran")
	}
}

func TestDeterminismHelpersAndContinueAsNew(t *testing.T) {
	loop := workflow.New[int, int]("Loop")
	env := workflowtest.New()
	start := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	env.SetStartTime(start)
	calls := 0
	_, err := workflowtest.Run(env, loop, func(ctx workflow.Context, n int) (int, error) {
		if now := workflow.Now(ctx); !now.Equal(start.Add(time.Minute*time.Duration(env.Executions()-1))) && env.Executions() == 1 {
			return 0, errors.New("Now is not the virtual clock")
		}
		x, err := workflow.SideEffect(ctx, "x", func() int { calls++; return 7 })
		if err != nil || x != 7 {
			return 0, errors.New("side effect")
		}
		if err := workflow.Sleep(ctx, "tick", time.Minute); err != nil {
			return 0, err
		}
		v, err := workflow.Version(ctx, "c", workflow.DefaultVersion, 2)
		if err != nil || v != 2 {
			return 0, errors.New("version")
		}
		return 0, loop.ContinueAsNew(ctx, n+1)
	}, 1)
	if !errors.Is(err, workflowtest.ErrContinuedAsNew) {
		t.Fatalf("run: %v", err)
	}
	if in, ok := env.ContinuedAsNew(); !ok || string(in) != "2" {
		t.Fatalf("continued with %s %v", in, ok)
	}
	if calls != 1 || env.Executions() != 2 {
		t.Fatalf("side effect calls %d over %d executions, want 1 over 2", calls, env.Executions())
	}
}

func TestCancelAfter(t *testing.T) {
	wait := workflow.New[struct{}, string]("WaitForApproval")
	env := workflowtest.New()
	env.OnStep("release", "released", nil)
	env.CancelAfter(time.Hour)
	_, err := workflowtest.Run(env, wait, func(ctx workflow.Context, _ struct{}) (string, error) {
		_, err := workflow.WaitForEvent[bool](ctx, "approval", 0)
		if errors.Is(err, workflow.ErrCancelled) {
			if _, cerr := workflow.Step(workflow.WithoutCancel(ctx), "release", func(context.Context) (string, error) { return "", nil }); cerr != nil {
				return "", cerr
			}
		}
		return "", err
	}, struct{}{})
	var re *workflowtest.RunError
	if !errors.As(err, &re) || !re.Cancelled {
		t.Fatalf("run error %v, want a cancelled run", err)
	}
	if env.Elapsed() != time.Hour {
		t.Fatalf("cancelled after %v of virtual time, want 1h", env.Elapsed())
	}
	steps := env.Steps()
	if len(steps) != 2 || steps[1].ID != "release" || steps[1].Status != "COMPLETED" {
		t.Fatalf("history %+v: want the cleanup step recorded", steps)
	}
}

// DrainEvents takes the events sent by now and records them as one step;
// later ones stay for the next drain.
func TestDrainEvents(t *testing.T) {
	env := workflowtest.New()
	env.SendEvent("add", "a")
	env.SendEvent("add", "b")
	env.SendEventAfter(time.Hour, "add", "c")
	env.SendEventAfter(time.Hour, "done", true)
	cart := workflow.New[int, []string]("Cart")
	got, err := workflowtest.Run(env, cart, func(ctx workflow.Context, _ int) ([]string, error) {
		first, err := workflow.WaitForEvent[string](ctx, "add", 0)
		if err != nil {
			return nil, err
		}
		now, err := workflow.DrainEvents[string](ctx, "add")
		if err != nil {
			return nil, err
		}
		if _, err := workflow.WaitForEvent[bool](ctx, "done", 0); err != nil {
			return nil, err
		}
		later, err := workflow.DrainEvents[string](ctx, "add")
		if err != nil {
			return nil, err
		}
		return append(append([]string{first}, now...), later...), nil
	}, 0)
	if err != nil || len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("cart: %q %v", got, err)
	}
	var drains []string
	for _, s := range env.Steps() {
		if s.Kind == "EVENT" && s.Status == "COMPLETED" {
			drains = append(drains, s.ID+"="+string(s.Output))
		}
	}
	want := []string{`event:add="a"`, `drain:add=["b"]`, `event:done=true`, `drain:add#2=["c"]`}
	if len(drains) != len(want) {
		t.Fatalf("steps %q, want %q", drains, want)
	}
	for i := range want {
		if drains[i] != want[i] {
			t.Fatalf("steps %q, want %q", drains, want)
		}
	}
}
