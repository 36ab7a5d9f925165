package dispatcher

import (
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// onPayloadRequest serves a worker's request for part of a payload its
// delivery (or a report reply) did not carry inline, under the run's lease.
// It answers off the subscription's goroutine: a read of a large payload
// must not hold up the next request.
func (d *Dispatcher) onPayloadRequest(m *nats.Msg) {
	var req protocol.PayloadRequest
	if err := protocol.Decode(m.Data, &req); err != nil {
		d.dropMalformed(m, err)
		return
	}
	if m.Reply == "" || m.Subject != protocol.SubjectPayload(req.Namespace) {
		d.dropMalformed(m, errors.New("payload request without a reply subject, or on another namespace's subject"))
		return
	}
	d.life.Go(func() { d.servePayload(m, &req) })
}

func (d *Dispatcher) servePayload(m *nats.Msg, req *protocol.PayloadRequest) {
	// Data travels base64-encoded in JSON: a chunk may take three quarters
	// of what a message holds.
	length := min(req.Length, protocol.MessagePayloadLimit(d.nc.MaxPayload())*3/4)
	part, err := d.st.PayloadsRead(d.ctx, store.PayloadsReadParams{
		Lease:  store.Lease{Namespace: req.Namespace, RunID: req.RunID, Token: req.LeaseToken},
		StepID: req.StepID, Attempt: req.Attempt, Offset: req.Offset, Length: max(length, 1),
	})
	chunk := protocol.PayloadChunk{Code: protocol.ResultOK, Data: part.Data, Total: part.Total}
	switch {
	case err == nil:
		d.payloadReads.Add(1)
	case errors.Is(err, store.ErrLeaseLost):
		chunk = protocol.PayloadChunk{Code: protocol.ResultLeaseLost, Message: err.Error()}
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalidArgument):
		chunk = protocol.PayloadChunk{Code: protocol.ResultInvalid, Message: err.Error()}
	default:
		if d.ctx.Err() != nil {
			return
		}
		d.log.Error("read payload", "run_id", req.RunID, "step_id", req.StepID, "err", err)
		chunk = protocol.PayloadChunk{Code: protocol.ResultError, Message: err.Error()}
	}
	data, err := protocol.Encode(&chunk)
	if err != nil {
		d.log.Error("encode payload chunk", "err", err)
		return
	}
	if err := m.Respond(data); err != nil {
		d.log.Warn("payload chunk not sent", "err", err)
	}
}
