package retry_test

import (
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/retry"
)

// A policy of four attempts, waiting 100 ms, then 200 ms, then 400 ms
// (without jitter), that gives up at once on a validation error.
func ExamplePolicy() {
	p := retry.Policy{
		MaxAttempts:     4,
		InitialInterval: 100 * time.Millisecond,
		Jitter:          -1,
		NonRetryable:    []string{"ValidationError"},
	}.WithDefaults()
	if err := p.Validate(); err != nil {
		panic(err)
	}
	for attempt := 1; !p.Exhausted(attempt); attempt++ {
		fmt.Printf("after attempt %d: wait %v\n", attempt, p.Delay(attempt, 0.5))
	}
	fmt.Println("retry a ValidationError:", !p.IsNonRetryable("ValidationError"))
	// Output:
	// after attempt 1: wait 100ms
	// after attempt 2: wait 200ms
	// after attempt 3: wait 400ms
	// retry a ValidationError: false
}
