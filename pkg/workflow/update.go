package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// ErrUpdateTimeout is wrapped, together with ErrEventTimeout, by the error
// Update.Handle returns when no update came before its timeout.
var ErrUpdateTimeout = errors.New("workflow: timed out waiting for update")

// InvalidRequestType is the error type of the answer to an update whose
// request does not decode into the update's request type.
const InvalidRequestType = "InvalidRequest"

// Update declares a request a workflow validates and answers while its
// caller waits ("add this item to the cart, tell me the new total"): its
// name, request type Req, response type Resp and validator. Declare it once
// beside the workflow; the workflow answers with Handle, a Go client sends
// with client.Update.
//
//	var AddItem = workflow.NewUpdate[Item, int]("AddItem", func(it Item) error {
//		if it.Price < 0 {
//			return errors.New("negative price")
//		}
//		return nil
//	})
type Update[Req, Resp any] struct {
	name     string
	validate func(Req) error
}

// NewUpdate declares the update name with request Req, response Resp and a
// validator (nil: every request is valid). The name must be a valid
// update name (protocol.ValidUpdateName); it is checked where the Update is
// used.
//
// The validator runs in the Go client before anything is recorded, so a
// rejected request leaves no trace in the run; it runs again in Handle
// before the handler, which also checks requests sent without it (the CLI,
// another language), their rejection then being the recorded answer.
func NewUpdate[Req, Resp any](name string, validate func(Req) error) Update[Req, Resp] {
	return Update[Req, Resp]{name: name, validate: validate}
}

// Name is the update's name.
func (u Update[Req, Resp]) Name() string { return u.name }

// Validate runs the update's validator on req (nil without one).
func (u Update[Req, Resp]) Validate(req Req) error {
	if u.validate == nil {
		return nil
	}
	return u.validate(req)
}

// Handle waits durably for the next update of this name sent to the run,
// runs fn on its request and records the answer, which the caller
// (client.Update) receives. Call it in a loop to serve many updates; they
// are handled one at a time, oldest first, each once.
//
// The wait is WaitForEvent's for the event protocol.UpdateEventName(name)
// (the EVENT step "event:update.<name>", "event:update.<name>#<n>" for the
// n-th): a request sent before the run waits is kept, and a run with none
// is suspended until one comes or the timeout passes. A timeout of zero or
// less waits without limit; when it passes, Handle returns an error
// wrapping ErrUpdateTimeout and ErrEventTimeout.
//
// The request is decoded into Req and checked by the validator; fn then
// runs with the run's context and may do anything workflow code does
// (steps, sleeps, children). Its outcome is recorded as the completed step
// "update:<name>" ("update:<name>#<n>"), its output a
// protocol.UpdateAnswer: the result, or fn's error (message and
// ErrorType), which is the caller's, not the run's: Handle returns nil and
// the workflow goes on. A request that does not decode or that the
// validator refuses is answered as rejected without running fn. The answer
// is sent with the run's next report (its next durable call or its end).
//
// Like a step, fn re-runs on every replay (so state it keeps in the
// workflow is rebuilt), and the recorded answer is kept. Handle returns an
// error only when no request was received (a timeout, the run's
// cancellation) or the answer could not be recorded.
func (u Update[Req, Resp]) Handle(ctx Context, timeout time.Duration, fn func(ctx Context, req Req) (Resp, error)) error {
	if err := protocol.ValidUpdateName(u.name); err != nil {
		return fmt.Errorf("workflow: %w", err)
	}
	if fn == nil {
		return fmt.Errorf("workflow: update %q: nil handler", u.name)
	}
	raw, eventStep, err := waitEvent(ctx, protocol.UpdateEventName(u.name), timeout)
	if errors.Is(err, ErrEventTimeout) {
		return fmt.Errorf("%w %q: %w", ErrUpdateTimeout, u.name, err)
	}
	if err != nil {
		return err
	}
	id, ok := protocol.UpdateStepID(eventStep)
	if !ok {
		return ctx.execution().replayError("update %q: received by step %q, which is no update's", u.name, eventStep)
	}
	ans := u.answer(ctx, raw, fn)
	// The answer is recorded even if the run was asked to cancel while fn
	// ran: the caller waits for it.
	_, err = Step(WithoutCancel(ctx), id, func(context.Context) (protocol.UpdateAnswer, error) { return ans, nil },
		WithRetry(retry.Policy{MaxAttempts: 1}), pureStep)
	return err
}

// answer runs the validator and fn on the raw request.
func (u Update[Req, Resp]) answer(ctx Context, raw json.RawMessage, fn func(ctx Context, req Req) (Resp, error)) protocol.UpdateAnswer {
	var req Req
	if err := json.Unmarshal(raw, &req); err != nil {
		return protocol.UpdateAnswer{Rejected: true, Type: InvalidRequestType,
			Error: fmt.Sprintf("update %q: request does not decode into %T: %v", u.name, req, err)}
	}
	if err := u.Validate(req); err != nil {
		return failedAnswer(err, true)
	}
	resp, err := fn(ctx, req)
	if err != nil {
		return failedAnswer(err, false)
	}
	out, err := json.Marshal(resp)
	if err == nil {
		err = ctx.execution().checkPayload(fmt.Sprintf("result of update %q", u.name), out)
	}
	if err != nil {
		return failedAnswer(fmt.Errorf("update %q: result: %w", u.name, err), false)
	}
	return protocol.UpdateAnswer{Result: out}
}

func failedAnswer(err error, rejected bool) protocol.UpdateAnswer {
	msg := err.Error()
	if msg == "" {
		msg = "update failed"
	}
	return protocol.UpdateAnswer{Error: protocol.ClipText(msg, protocol.MaxErrorLen), Type: ErrorType(err), Rejected: rejected}
}
