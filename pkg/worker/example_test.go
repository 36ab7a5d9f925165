package worker_test

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

var greet = workflow.New[string, string]("Greet")

// A worker serving one type at two versions: runs pinned to v1 (started
// before v2 existed) go on with v1's code; runs started without a version
// get the operator's default version (`kagzi workflow default-version
// Greet v2`), or without one v1, the version registered first.
func ExampleImplement() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	w, err := worker.New(worker.Config{Queue: "greetings"}, nc)
	if err != nil {
		return
	}
	v1 := func(ctx workflow.Context, name string) (string, error) { return "Hello, " + name, nil }
	v2 := func(ctx workflow.Context, name string) (string, error) {
		return workflow.Step(ctx, "shout", func(context.Context) (string, error) { return strings.ToUpper("hello, " + name), nil })
	}
	if err := worker.Implement(w, greet, v1, worker.WithVersion("v1")); err != nil {
		return
	}
	if err := worker.Implement(w, greet, v2, worker.WithVersion("v2")); err != nil {
		return
	}
	_ = w.Run(context.Background())
}
