// Package testflows holds the workflows Kagzi's own test harnesses drive:
// the chaos probe (`kagzi chaos`, tests/chaos), the bench's Hold and
// Probe (`kagzi bench`, cmd/kagzi/internal/bench) and the model test's program
// interpreter (tests/modeltest). They are not examples and the
// reference worker does not register them; `kagzi serve worker` and
// `kagzi dev` do, next to the examples.
package testflows

import (
	"errors"

	"github.com/kagzi/kagzi/pkg/worker"
)

// Register registers every harness workflow on w.
func Register(w *worker.Worker) error {
	return errors.Join(registerBench(w), registerChaos(w), registerModel(w))
}
