package workflowtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/pkg/workflowtest"
)

var (
	counter  = workflow.New[int, int]("Counter")
	increase = workflow.NewUpdate[int, int]("Increase", func(by int) error {
		if by <= 0 {
			return errors.New("increase by a positive amount")
		}
		return nil
	})
)

// counterFn handles Increase n times, refusing amounts over 100 in the
// handler, and returns the sum once n were handled or none came for an
// hour.
func counterFn(ctx workflow.Context, n int) (int, error) {
	sum := 0
	for range n {
		if err := increase.Handle(ctx, time.Hour, func(ctx workflow.Context, by int) (int, error) {
			if by > 100 {
				return 0, errors.New("too much")
			}
			sum += by
			return sum, nil
		}); errors.Is(err, workflow.ErrUpdateTimeout) && errors.Is(err, workflow.ErrEventTimeout) {
			break
		} else if err != nil {
			return 0, err
		}
	}
	return sum, nil
}

func TestUpdates(t *testing.T) {
	env := workflowtest.New()
	if err := workflowtest.SendUpdate(env, increase, -1); err == nil {
		t.Fatal("the validator did not refuse a negative amount")
	}
	for i, by := range []int{2, 500} {
		if err := workflowtest.SendUpdateAfter(env, time.Duration(i)*time.Minute, increase, by); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing more comes: the third Handle times out.
	if sum, err := workflowtest.Run(env, counter, counterFn, 3); err != nil || sum != 2 {
		t.Fatalf("run: %d %v", sum, err)
	}
	if v, err := workflowtest.UpdateResult(env, increase, 1); err != nil || v != 2 {
		t.Fatalf("first answer: %d %v", v, err)
	}
	var ue *workflowtest.UpdateError
	if _, err := workflowtest.UpdateResult(env, increase, 2); !errors.As(err, &ue) || ue.Message != "too much" || ue.Rejected {
		t.Fatalf("second answer: %v", err)
	}
	if _, err := workflowtest.UpdateResult(env, increase, 3); !errors.Is(err, workflowtest.ErrNotAnswered) {
		t.Fatalf("third answer: %v", err)
	}
}
