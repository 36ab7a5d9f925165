package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/hops"
	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// deliver hands claimed runs to the worker and releases them at once if it
// does not take them.
func (d *Dispatcher) deliver(p *parked, runs []store.ClaimedRun) {
	limits, err := d.payloadLimits()
	if err != nil {
		d.log.Error("read payload limits; releasing", "err", err)
		d.release(runs)
		d.repark(p)
		return
	}
	msg := protocol.Delivery{WorkerID: p.req.WorkerID, Seq: p.req.Seq, Runs: deliveredRuns(runs), Limits: limits}
	spans := make([]trace.Span, len(runs))
	// The attempt the delivery starts is a child of its dispatch span.
	d.tel.startDispatch(d.ctx, runs, msg.Runs, p.req.WorkerID, spans)
	data, release, err := d.fit(&msg, p.enc, &runs)
	if len(spans) > len(runs) {
		endDispatch(spans[len(runs):], errReleased)
		spans = spans[:len(runs)]
	}
	d.release(release)
	if err != nil {
		d.log.Error("delivery does not encode; releasing", "err", err)
		endDispatch(spans, err)
		d.release(runs)
		d.repark(p)
		return
	}
	if data == nil {
		// The one run left cannot be delivered at all; fit failed it.
		endDispatch(spans, errUndeliverable)
		d.repark(p)
		return
	}
	// A delivery of one run carries its dispatch span as the W3C header
	// too; several runs are several traces, each in its DeliveredRun.
	hctx := d.ctx
	if len(spans) == 1 && spans[0] != nil {
		hctx = trace.ContextWithSpan(hctx, spans[0])
	}
	if d.hops != nil {
		now := d.hops.Now()
		for i := range runs {
			d.hops.Mark(runs[i].ID, hops.Delivered, now)
		}
	}
	reply, err := d.nc.RequestMsg(tracectx.Msg(hctx, p.reply, data), d.cfg.DeliveryTimeout)
	endDispatch(spans, err)
	if err != nil {
		d.log.Warn("delivery not acknowledged; releasing", "worker_id", p.req.WorkerID, "runs", len(runs), "err", err)
		d.release(runs)
		return
	}
	var ack protocol.DeliveryAck
	if err := protocol.Decode(reply.Data, &ack); err != nil {
		d.dropMalformed(reply, err)
		d.release(runs)
		return
	}
	if !ack.Accepted {
		d.release(runs)
		return
	}
	d.deliveries.Add(1)
}

// fit encodes msg within the NATS server's message size: runs that do not
// fit are left out (halving) and returned to be released; a single run
// whose inline payloads do not fit is sent with all of them by size (the
// worker fetches them); a single run whose history does not fit even so is
// failed with a clear error, and fit returns no data. msg.Runs and *runs
// are cut to what is sent.
func (d *Dispatcher) fit(msg *protocol.Delivery, enc protocol.Encoding, runs *[]store.ClaimedRun) (data []byte, release []store.ClaimedRun, err error) {
	limit := d.nc.MaxPayload()
	data, err = protocol.EncodeAs(msg, enc)
	for err == nil && int64(len(data)) > limit && len(msg.Runs) > 1 {
		half := len(msg.Runs) / 2
		release = append(release, (*runs)[half:]...)
		*runs, msg.Runs = (*runs)[:half], msg.Runs[:half]
		data, err = protocol.EncodeAs(msg, enc)
	}
	if err != nil || int64(len(data)) <= limit {
		return data, release, err
	}
	byReference(&msg.Runs[0])
	if data, err = protocol.EncodeAs(msg, enc); err != nil || int64(len(data)) <= limit {
		return data, release, err
	}
	c := &(*runs)[0]
	d.failRun(store.Lease{Namespace: c.Namespace, RunID: c.ID, Token: c.LeaseToken}, c.Type,
		fmt.Sprintf("the run's history cannot be delivered: its %d step records take %d bytes without any payload, "+
			"more than the NATS server's max_payload of %d bytes", len(c.Steps), len(data), limit))
	*runs = nil
	return nil, release, nil
}

// byReference leaves every payload of r out of the delivery, sending its
// size instead.
func byReference(r *protocol.DeliveredRun) {
	if len(r.Input) > 0 {
		r.InputSize, r.Input = len(r.Input), nil
	}
	for i := range r.Steps {
		if s := &r.Steps[i]; len(s.Output) > 0 {
			s.OutputSize, s.Output = len(s.Output), nil
		}
	}
}

// payloadLimits are the limits workers are told: the database's, within
// what one NATS message of this server can carry around one payload.
func (d *Dispatcher) payloadLimits() (protocol.PayloadLimits, error) {
	set, err := d.st.Limits(d.ctx)
	if err != nil {
		return protocol.PayloadLimits{}, err
	}
	max := min(set.PayloadMaxBytes, protocol.MessagePayloadLimit(d.nc.MaxPayload()))
	return protocol.PayloadLimits{MaxBytes: max, WarnBytes: min(set.PayloadWarnBytes, max)}, nil
}

// checkPayloadLimits warns when the NATS server cannot carry payloads as
// large as the database allows: workers are then told the smaller limit.
func (d *Dispatcher) checkPayloadLimits() {
	set, err := d.st.Limits(d.ctx)
	if err != nil {
		d.log.Warn("read payload limits", "err", err)
		return
	}
	if fit := protocol.MessagePayloadLimit(d.nc.MaxPayload()); fit < set.PayloadMaxBytes {
		d.log.Warn("NATS max_payload is smaller than the payload limit: outputs reported by workers are limited to what fits",
			"nats_max_payload", d.nc.MaxPayload(), "payload_max_bytes", set.PayloadMaxBytes, "reportable_bytes", fit)
	}
}

// repark puts back a request whose delivery failed before it reached the
// worker, so the worker is not left waiting for its request to time out.
func (d *Dispatcher) repark(p *parked) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil || time.Now().After(p.expires) {
		return
	}
	q := d.queueLocked(qkey{p.req.Namespace, p.req.Queue})
	for _, x := range q.parked {
		if x.req.WorkerID == p.req.WorkerID {
			return // superseded by a newer request
		}
	}
	q.parked = append(q.parked, p)
	d.signal(q)
}

// failRun ends a run for good with reason, under its lease, and announces
// it.
func (d *Dispatcher) failRun(l store.Lease, typ, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	if err := d.st.RunsFail(ctx, l, reason); err != nil {
		d.log.Error("fail run", "run_id", l.RunID, "reason", reason, "err", err)
		return
	}
	d.log.Warn("run failed by the dispatcher", "run_id", l.RunID, "reason", reason)
	d.tel.finished(d.ctx, l.Namespace, typ, string(store.StatusFailed))
	if data, err := protocol.Encode(&protocol.RunFinished{Namespace: l.Namespace, RunID: l.RunID, Status: string(store.StatusFailed)}); err == nil {
		_ = d.nc.Publish(protocol.SubjectDone(l.Namespace, l.RunID), data)
	}
}

func (d *Dispatcher) release(runs []store.ClaimedRun) {
	if len(runs) == 0 {
		return
	}
	leases := make([]store.Lease, len(runs))
	for i, r := range runs {
		leases[i] = store.Lease{Namespace: r.Namespace, RunID: r.ID, Token: r.LeaseToken}
	}
	// The dispatcher's own context may be ending; the release must still
	// happen or the runs wait for their lease to expire.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	n, err := d.st.RunsReleaseMany(ctx, leases)
	if err != nil {
		d.log.Error("release undelivered runs", "runs", len(runs), "err", err)
		return
	}
	d.released.Add(n)
}

// Why dispatch spans ended without a delivery.
var (
	errReleased      = errors.New("released: the delivery had no room for the run")
	errUndeliverable = errors.New("the run's history cannot be delivered")
)

// endDispatch ends dispatch spans, with err if the delivery failed. It
// lives with the delivery, which alone ends them, rather than with the
// instruments that started them.
func endDispatch(spans []trace.Span, err error) {
	for _, sp := range spans {
		if sp == nil {
			continue
		}
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
}
