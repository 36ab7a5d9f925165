package workflowtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// ErrNotAnswered is returned by UpdateResult for an update the run did not
// answer.
var ErrNotAnswered = errors.New("workflowtest: update not answered")

// UpdateError is the answer to an update whose handler returned an error,
// or that the workflow's validator rejected, as UpdateResult returns it.
type UpdateError struct {
	Message string
	// Type is the error's type (workflow.ErrorType).
	Type string
	// Rejected: the workflow's validator refused the request.
	Rejected bool
}

func (e *UpdateError) Error() string { return e.Message }

// SendUpdate sends a request of the update u to the run now, as
// client.Update does: the update's validator runs first, and a request it
// refuses is returned as its error and not sent. The run's handlers
// (Update.Handle) receive the requests in the order they were sent; read
// the answers with UpdateResult.
func SendUpdate[Req, Resp any](e *Env, u workflow.Update[Req, Resp], req Req) error {
	return SendUpdateAfter(e, 0, u, req)
}

// SendUpdateAfter is SendUpdate d after the run's start (virtual time).
func SendUpdateAfter[Req, Resp any](e *Env, d time.Duration, u workflow.Update[Req, Resp], req Req) error {
	if err := u.Validate(req); err != nil {
		return err
	}
	e.SendEventAfter(d, protocol.UpdateEventName(u.Name()), req)
	return nil
}

// UpdateResult returns the answer to the n-th (from 1) update of u the run
// handled: the handler's result, an *UpdateError, or ErrNotAnswered.
func UpdateResult[Req, Resp any](e *Env, u workflow.Update[Req, Resp], n int) (Resp, error) {
	var zero Resp
	id := protocol.UpdateStepPrefix + u.Name()
	if n > 1 {
		id += "#" + strconv.Itoa(n)
	}
	for _, s := range e.Steps() {
		if s.ID != id || s.Status != "COMPLETED" {
			continue
		}
		a, err := protocol.DecodeUpdateAnswer(s.Output)
		if err != nil {
			return zero, err
		}
		if a.Error != "" {
			return zero, &UpdateError{Message: a.Error, Type: a.Type, Rejected: a.Rejected}
		}
		var v Resp
		if err := json.Unmarshal(a.Result, &v); err != nil {
			return zero, fmt.Errorf("workflowtest: update %q: the answer does not decode into %T: %w", u.Name(), v, err)
		}
		return v, nil
	}
	return zero, fmt.Errorf("%w: %s", ErrNotAnswered, id)
}
