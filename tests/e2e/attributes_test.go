package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// A workflow sets and removes its run's search attributes through the
// real services; the run is found by them. A set the declarations refuse
// is an error the workflow sees, recorded, so the execution after a sleep
// replays the same path: each SetAttributes is recorded once.
func TestWorkflowSetsAttributes(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Tagged", func(ctx workflow.Context, customer string) (string, error) {
			if err := workflow.SetAttributes(ctx, map[string]any{"customer": customer, "amount": 12, "due": due,
				"tags": []string{"red", "blue"}}); err != nil {
				return "", err
			}
			refused := workflow.SetAttributes(ctx, map[string]any{"nope": 1, "amount": 13})
			if !errors.Is(refused, workflow.ErrAttributesRefused) {
				return "", errors.New("an undeclared attribute was not refused")
			}
			// A second execution: the calls above replay from the record.
			if err := workflow.Sleep(ctx, "nap", 10*time.Millisecond); err != nil {
				return "", err
			}
			if err := workflow.SetAttributes(ctx, map[string]any{"amount": nil, "tags": "green"}); err != nil {
				return "", err
			}
			return refused.Error(), nil
		})
	}})
	ctx := context.Background()
	for name, kind := range map[string]client.AttributeKind{"customer": client.AttributeKeyword, "amount": client.AttributeInt,
		"due": client.AttributeTime, "tags": client.AttributeKeyword} {
		if err := e.cl.DeclareAttribute(ctx, name, kind); err != nil {
			t.Fatal(err)
		}
	}
	h, err := e.cl.Start(ctx, "Tagged", "42", client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := h.Result(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"nope"`) {
		t.Fatalf("the refusal %q does not name the undeclared attribute", out)
	}

	attrs, err := e.cl.RunAttributes(ctx, h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if attrs["customer"] != "42" || attrs["tags"] != "green" || attrs["amount"] != nil {
		t.Fatalf("attributes %v: want customer 42, tags green, no amount", attrs)
	}
	if d, ok := attrs["due"].(time.Time); !ok || !d.Equal(due) {
		t.Fatalf("due %v, want %v", attrs["due"], due)
	}
	for q, want := range map[string]int{
		`customer = '42' AND amount IS NULL`: 1,
		`tags = 'green'`:                     1,
		`tags = 'red'`:                       0,
		`due = '2026-03-04T05:06:07Z'`:       1,
	} {
		runs, _, err := e.cl.List(ctx, client.ListOptions{Query: q})
		if err != nil || len(runs) != want {
			t.Errorf("%s: %d runs, %v; want %d", q, len(runs), err, want)
		}
	}

	steps, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, s := range steps {
		if strings.HasPrefix(s.StepID, protocol.AttributesPrefix) {
			got[s.StepID] = append(got[s.StepID], string(s.Status)+" "+s.ErrorType)
		}
	}
	want := map[string][]string{
		protocol.AttributesStepID(1): {string(store.StepCompleted) + " "},
		protocol.AttributesStepID(2): {string(store.StepFailed) + " " + protocol.AttributesRefused},
		protocol.AttributesStepID(3): {string(store.StepCompleted) + " "},
	}
	for id, w := range want {
		if g := got[id]; len(g) != 1 || g[0] != w[0] {
			t.Errorf("step %s: %v, want %v", id, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("attribute steps %v, want %v", got, want)
	}
}
