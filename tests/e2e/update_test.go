package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

type cartItem struct {
	Name  string `json:"name"`
	Price int    `json:"price"`
}

// outOfStock is the handler's error for an item it refuses.
type outOfStock struct{ item string }

func (e *outOfStock) Error() string { return e.item + " is out of stock" }

var (
	cartFlow = workflow.New[int, int]("Cart")
	addItem  = workflow.NewUpdate[cartItem, int]("AddItem", func(it cartItem) error {
		if it.Price < 0 {
			return fmt.Errorf("price %d is negative", it.Price)
		}
		return nil
	})
)

// cart handles AddItem until n items were added and returns the total;
// each addition is a step, so the handler does durable work, and the
// total is rebuilt by replay.
func cart(ctx workflow.Context, n int) (int, error) {
	total, added := 0, 0
	for added < n {
		err := addItem.Handle(ctx, 0, func(ctx workflow.Context, it cartItem) (int, error) {
			if it.Name == "sold-out" {
				return 0, &outOfStock{item: it.Name}
			}
			price, err := workflow.Step(ctx, fmt.Sprintf("add#%d", added+1), func(context.Context) (int, error) { return it.Price, nil })
			if err != nil {
				return 0, err
			}
			total += price
			added++
			return total, nil
		})
		if err != nil {
			return 0, err
		}
	}
	return total, nil
}

func registerCart(w *worker.Worker) error { return worker.Implement(w, cartFlow, cart) }

// An update is answered by the workflow while the caller waits: three
// additions return the running totals; a request the validator refuses
// fails at once and leaves no trace in the run; a handler's error is the
// caller's (the run goes on); once the run completed, an update fails at
// once.
func TestUpdateCart(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: registerCart})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := client.StartWorkflow(ctx, e.cl, cartFlow, 3, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Update(ctx, e.cl, h.RunID, addItem, cartItem{Name: "refund", Price: -5})
	var rejected *client.UpdateRejectedError
	if !errors.As(err, &rejected) || !errors.Is(err, client.ErrUpdateRejected) || rejected.UpdateID != uuid.Nil ||
		!strings.Contains(rejected.Message, "negative") {
		t.Fatalf("negative price: want a rejection by the client's validator, got %v", err)
	}
	for i, c := range []struct {
		item cartItem
		want int
	}{{cartItem{"apple", 10}, 10}, {cartItem{"pear", 20}, 30}} {
		got, err := client.Update(ctx, e.cl, h.RunID, addItem, c.item)
		if err != nil || got != c.want {
			t.Fatalf("update %d: got %d, %v; want %d", i, got, err, c.want)
		}
	}
	_, err = client.Update(ctx, e.cl, h.RunID, addItem, cartItem{Name: "sold-out", Price: 1})
	var failed *client.UpdateFailedError
	if !errors.As(err, &failed) || !errors.Is(err, client.ErrUpdateFailed) || failed.Type != "outOfStock" ||
		failed.Message != "sold-out is out of stock" || failed.UpdateID == uuid.Nil {
		t.Fatalf("handler error: want *UpdateFailedError, got %v", err)
	}
	// Without the Go declaration (the CLI's form) the client runs no
	// validator: the workflow's refuses the request, or one that does not
	// decode, and the rejection is the recorded answer.
	for _, c := range []struct{ req, typ string }{{`{"name":"credit","price":-5}`, "errorString"}, {`"oops"`, workflow.InvalidRequestType}} {
		_, err = e.cl.UpdateRaw(ctx, h.RunID, "AddItem", json.RawMessage(c.req))
		if !errors.As(err, &rejected) || rejected.UpdateID == uuid.Nil || rejected.Type != c.typ {
			t.Fatalf("raw update %s: want a rejection by the workflow, got %v", c.req, err)
		}
	}
	if r, err := e.cl.Get(ctx, h.RunID); err != nil || r.Status.Terminal() {
		t.Fatalf("the run after a failed update: %+v %v", r, err)
	}
	if got, err := client.Update(ctx, e.cl, h.RunID, addItem, cartItem{"plum", 30}); err != nil || got != 60 {
		t.Fatalf("third addition: got %d, %v; want 60", got, err)
	}
	if total, err := h.Result(ctx); err != nil || total != 60 {
		t.Fatalf("run result: %d %v", total, err)
	}

	// History: four requests received and answered, the refused one nowhere.
	events, err := e.srv.Store.EventsList(ctx, "default", h.RunID)
	if err != nil || len(events) != 6 {
		t.Fatalf("events: %+v %v", events, err)
	}
	for _, ev := range events {
		if ev.Name != "update.AddItem" || ev.ConsumedAt == nil || strings.Contains(string(ev.Payload), "refund") {
			t.Fatalf("event: %+v (%s)", ev, ev.Payload)
		}
	}
	var answers []string
	for _, s := range e.steps(h.RunID) {
		if strings.Contains(string(s.Input)+string(s.Output), "refund") {
			t.Fatalf("the rejected update left step %s: %s %s", s.StepID, s.Input, s.Output)
		}
		if strings.HasPrefix(s.StepID, "update:") {
			answers = append(answers, s.StepID+"="+string(s.Output))
		}
	}
	want := []string{`update:AddItem={"result":10}`, `update:AddItem#2={"result":30}`,
		`update:AddItem#3={"error":"sold-out is out of stock","type":"outOfStock"}`, `update:AddItem#4={"error":"price -5 is negative","type":"errorString","rejected":true}`,
		`update:AddItem#5={"error":"update \"AddItem\": request does not decode into e2e_test.cartItem: json: cannot unmarshal string into Go value of type e2e_test.cartItem","type":"InvalidRequest","rejected":true}`,
		`update:AddItem#6={"result":60}`}
	if !slices.Equal(answers, want) {
		t.Fatalf("answer steps:\n got %q\nwant %q", answers, want)
	}

	// A finished run refuses at once; an unknown run is not found.
	began := time.Now()
	_, err = client.Update(ctx, e.cl, h.RunID, addItem, cartItem{"late", 1})
	if !errors.Is(err, client.ErrRunFinished) || !errors.Is(err, client.ErrConflict) || time.Since(began) > 5*time.Second {
		t.Fatalf("update of a completed run: want ErrRunFinished at once, got %v after %v", err, time.Since(began))
	}
	if _, err := client.Update(ctx, e.cl, uuid.New(), addItem, cartItem{"lost", 1}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("update of an unknown run: want ErrNotFound, got %v", err)
	}
	if events, _ := e.srv.Store.EventsList(ctx, "default", h.RunID); len(events) != 6 {
		t.Fatalf("a refused update was stored: %d events", len(events))
	}
}

// Updates sent at once from several goroutines are handled one at a time,
// and each caller gets its own answer: the total after its own item.
func TestUpdateConcurrentCallers(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 2, register: registerCart})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 8
	h, err := client.StartWorkflow(ctx, e.cl, cartFlow, n, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Powers of two: each total says which items it includes.
	got := make([]int, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			v, err := client.Update(ctx, e.cl, h.RunID, addItem, cartItem{Name: fmt.Sprint("item", i), Price: 1 << i})
			if err != nil {
				errs <- fmt.Errorf("caller %d: %w", i, err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	if len(slices.Compact(slices.Clone(sorted))) != n {
		t.Fatalf("two callers got the same answer: %v", got)
	}
	for i, v := range got {
		// The caller's item is in its total, and the total before it is
		// the answer of the update handled just before (or none).
		prev := v - 1<<i
		if v&(1<<i) == 0 || (prev != 0 && !slices.Contains(got, prev)) {
			t.Fatalf("caller %d (price %d) got %d; all answers %v", i, 1<<i, v, got)
		}
	}
	if total, err := h.Result(ctx); err != nil || total != 1<<n-1 || sorted[n-1] != total {
		t.Fatalf("run result %d %v; answers %v", total, err, got)
	}
}

// An update sent now can be waited for later (UpdateSend, UpdateResult);
// a run that ends without handling it answers its caller with
// *UpdateUnansweredError instead of leaving it waiting.
func TestUpdateUnanswered(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Ignores", func(ctx workflow.Context, _ int) (string, error) {
			return workflow.WaitForEvent[string](ctx, "stop", 0)
		})
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := e.cl.Start(ctx, "Ignores", 0, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.cl.UpdateSend(ctx, h.RunID, "AddItem", cartItem{"apple", 1})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := e.cl.UpdateResult(ctx, h.RunID, id)
		waiting <- err
	}()
	if _, err := e.cl.SendEvent(ctx, h.RunID, "stop", "done"); err != nil {
		t.Fatal(err)
	}
	err = <-waiting
	var un *client.UpdateUnansweredError
	if !errors.As(err, &un) || !errors.Is(err, client.ErrRunFinished) || un.Status != client.StatusCompleted || un.Received || un.UpdateID != id {
		t.Fatalf("update of a run that ended without handling it: %v", err)
	}
	if _, err := e.cl.UpdateResult(ctx, h.RunID, uuid.New()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("result of an update never sent: want ErrNotFound, got %v", err)
	}
}
