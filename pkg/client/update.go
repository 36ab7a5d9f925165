package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Typed errors of updates.
var (
	// ErrUpdateRejected is wrapped by the error of an update whose
	// validator refused it; errors.As to *UpdateRejectedError.
	ErrUpdateRejected = errors.New("update rejected")
	// ErrUpdateFailed is wrapped by the error of an update whose handler
	// returned an error; errors.As to *UpdateFailedError.
	ErrUpdateFailed = errors.New("update failed")
	// ErrRunFinished (an ErrConflict) is wrapped by the error of an update
	// sent to a run that is finished (refused at once), by an
	// *UpdateUnansweredError (the run finished without answering), and by
	// the *RunFinishedError of WaitState and Client.StateWait (the run
	// ended before it recorded what was waited for).
	ErrRunFinished = store.ErrRunFinished
)

// UpdateRejectedError is an update refused by its validator. Refused by
// the Go client's validator (UpdateID is uuid.Nil) it left no trace in the
// run; refused by the workflow's (a request from a caller that did not
// validate, or that did not decode), the rejection is its recorded answer.
type UpdateRejectedError struct {
	RunID    uuid.UUID
	UpdateID uuid.UUID
	Name     string
	Message  string
	// Type is the validator error's type (workflow.ErrorType).
	Type string
}

func (e *UpdateRejectedError) Error() string {
	return fmt.Sprintf("update %q of run %s rejected: %s", e.Name, e.RunID, e.Message)
}

// Unwrap makes errors.Is(err, ErrUpdateRejected) hold.
func (e *UpdateRejectedError) Unwrap() error { return ErrUpdateRejected }

// UpdateFailedError is an update whose handler returned an error: the
// caller's failure, not the run's, which goes on.
type UpdateFailedError struct {
	RunID    uuid.UUID
	UpdateID uuid.UUID
	Name     string
	Message  string
	// Type is the handler error's type (workflow.ErrorType).
	Type string
}

func (e *UpdateFailedError) Error() string {
	return fmt.Sprintf("update %q of run %s failed: %s", e.Name, e.RunID, e.Message)
}

// Unwrap makes errors.Is(err, ErrUpdateFailed) hold.
func (e *UpdateFailedError) Unwrap() error { return ErrUpdateFailed }

// UpdateUnansweredError is an update the run accepted but finished
// without answering (it stopped handling updates of that name, failed, was
// cancelled or continued as new).
type UpdateUnansweredError struct {
	RunID    uuid.UUID
	UpdateID uuid.UUID
	Name     string
	// Status is the run's final status.
	Status RunStatus
	// Received: a handler received the request (the run ended while it
	// ran), as opposed to never waiting for it.
	Received bool
}

func (e *UpdateUnansweredError) Error() string {
	what := "before receiving it"
	if e.Received {
		what = "while handling it"
	}
	return fmt.Sprintf("update %q of run %s not answered: the run ended %s %s", e.Name, e.RunID, e.Status, what)
}

// Unwrap makes errors.Is(err, ErrRunFinished) hold.
func (e *UpdateUnansweredError) Unwrap() error { return ErrRunFinished }

// Update sends the update u with request req to the run runID and waits
// for the workflow's answer (u.Handle), by push.
//
// The update's validator runs first, here: a request it refuses returns an
// *UpdateRejectedError (ErrUpdateRejected) and nothing is recorded. An
// unknown run is ErrNotFound; a finished run fails at once with
// ErrRunFinished (decided in the transaction that would store the request,
// so a run finishing meanwhile cannot swallow it). Otherwise Update returns
// the handler's result, an *UpdateFailedError (ErrUpdateFailed) if the
// handler returned an error, an *UpdateUnansweredError (ErrRunFinished) if
// the run ended without answering, or ctx's error; an update whose caller
// gave up is still answered (see UpdateResult).
func Update[Req, Resp any](ctx context.Context, c *Client, runID uuid.UUID, u workflow.Update[Req, Resp], req Req) (Resp, error) {
	var zero Resp
	if err := protocol.ValidUpdateName(u.Name()); err != nil {
		return zero, fmt.Errorf("update: %w: %v", ErrInvalidArgument, err)
	}
	if err := u.Validate(req); err != nil {
		return zero, &UpdateRejectedError{RunID: runID, Name: u.Name(), Message: err.Error(), Type: workflow.ErrorType(err)}
	}
	raw, err := encodeInput(req)
	if err != nil {
		return zero, fmt.Errorf("update %q: %w", u.Name(), err)
	}
	out, err := c.UpdateRaw(ctx, runID, u.Name(), raw)
	if err != nil {
		return zero, err
	}
	var v Resp
	if err := json.Unmarshal(out, &v); err != nil {
		return zero, fmt.Errorf("update %q of run %s: the answer does not decode into %T: %w", u.Name(), runID, v, err)
	}
	return v, nil
}

// UpdateRaw is Update by name with a JSON request, for callers without the
// Go declaration (the CLI): no validator runs here, only the workflow's in
// Handle. It returns the handler's result as JSON.
func (c *Client) UpdateRaw(ctx context.Context, runID uuid.UUID, name string, payload json.RawMessage) (json.RawMessage, error) {
	f, err := c.follow(ctx, runID, true)
	if err != nil {
		return nil, fmt.Errorf("update %q: %w", protocol.Echo(name), err)
	}
	defer f.close()
	id, err := c.UpdateSend(ctx, runID, name, payload)
	if err != nil {
		return nil, err
	}
	return c.updateAwait(ctx, f, runID, id)
}

// UpdateSend sends an update's request (payload encoded as JSON; nil is
// null) to the run and returns the update's id at once, without waiting;
// UpdateResult waits for its answer. No validator runs. It fails like
// Update: ErrNotFound, ErrRunFinished, ErrInvalidArgument,
// ErrPayloadTooLarge.
func (c *Client) UpdateSend(ctx context.Context, runID uuid.UUID, name string, payload any) (uuid.UUID, error) {
	if runID == uuid.Nil {
		return uuid.Nil, fmt.Errorf("update: %w: run id is required", ErrInvalidArgument)
	}
	raw, err := encodeInput(payload)
	if err != nil {
		return uuid.Nil, fmt.Errorf("update %q: %w", protocol.Echo(name), err)
	}
	ev, err := c.st.UpdatesSend(ctx, store.UpdatesSendParams{Namespace: c.ns, RunID: runID, Name: name, Payload: raw})
	if err != nil {
		return uuid.Nil, err
	}
	return ev.ID, nil
}

// UpdateResult waits, by push, for the answer to the update updateID
// (UpdateSend's) of the run and returns it as UpdateRaw does. An update
// the run was not sent is ErrNotFound.
func (c *Client) UpdateResult(ctx context.Context, runID, updateID uuid.UUID) (json.RawMessage, error) {
	f, err := c.follow(ctx, runID, true)
	if err != nil {
		return nil, fmt.Errorf("update %s: %w", updateID, err)
	}
	defer f.close()
	return c.updateAwait(ctx, f, runID, updateID)
}

// updateAwait reads the update's state until it is answered or the run
// has ended, waiting on f (subscribed before the update was sent, or
// before the first read) between reads.
func (c *Client) updateAwait(ctx context.Context, f *follower, runID, updateID uuid.UUID) (json.RawMessage, error) {
	for {
		resync := c.resyncChan()
		st, err := c.st.UpdatesAnswer(ctx, c.ns, runID, updateID)
		if err != nil {
			return nil, err
		}
		if st.Answered {
			return answerOf(st)
		}
		if st.RunStatus.Terminal() {
			return nil, &UpdateUnansweredError{RunID: runID, UpdateID: updateID, Name: st.Name,
				Status: st.RunStatus, Received: st.ReceivedBy != ""}
		}
		if err := f.wait(ctx, resync); err != nil {
			return nil, err
		}
	}
}

func answerOf(st store.UpdateState) (json.RawMessage, error) {
	a, err := protocol.DecodeUpdateAnswer(st.Answer)
	if err != nil {
		return nil, fmt.Errorf("update %q of run %s: %w", st.Name, st.RunID, err)
	}
	switch {
	case a.Rejected:
		return nil, &UpdateRejectedError{RunID: st.RunID, UpdateID: st.ID, Name: st.Name, Message: a.Error, Type: a.Type}
	case a.Error != "":
		return nil, &UpdateFailedError{RunID: st.RunID, UpdateID: st.ID, Name: st.Name, Message: a.Error, Type: a.Type}
	}
	return a.Result, nil
}
