package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/kagzi/kagzi/internal/tracectx"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Report combining. Many runs finish steps at the same moment; sending each
// report as its own NATS request would cost a message, a decode and a
// dispatcher job per step. Instead, callers queue their items and whoever
// finds a sending slot free sends everything queued as one Report, then
// keeps sending what queued meanwhile until the queue is empty. With a few
// sends in flight at once, a lone report goes out at once and a burst goes
// out in a few large reports. No goroutine is started for this: callers do
// the sending.

// maxInflightReports bounds the combined reports in flight at once.
const maxInflightReports = 4

// maxCombinedItems bounds the items of one combined report.
const maxCombinedItems = 1000

// errTooLarge: a report does not fit in one NATS message. Combined reports
// stay within the server's max_payload by construction and are split if
// one does not; a single run's report that does not fit would not fit on
// any retry, so it is not retried.
var errTooLarge = errors.New("worker: report larger than the NATS server's max_payload")

// itemBytes estimates the encoded size of a report item: its payloads and
// texts plus room for its fixed fields.
func itemBytes(it *protocol.ReportItem) int {
	n := 320 + len(it.Output) + len(it.Error) + len(it.ErrorType) + len(it.StepID) + len(it.Name)
	for _, s := range it.Steps {
		n += len(s) + 4
	}
	for _, s := range it.EventNames {
		n += len(s) + 4
	}
	if it.Child != nil {
		n += 200 + len(it.Child.Input) + len(it.Child.Type) + len(it.Child.Version) + len(it.Child.Queue)
	}
	return n
}

func callBytes(c *reportCall) int {
	n := 0
	for i := range c.items {
		n += itemBytes(&c.items[i])
	}
	return n
}

type reportCall struct {
	// sc is the caller's span (the run's attempt): a report of one run's
	// items carries it as the W3C traceparent header.
	sc      trace.SpanContext
	items   []protocol.ReportItem
	results []protocol.ReportResult
	err     error
	done    chan struct{}
}

type combiner struct {
	mu       sync.Mutex
	pending  []*reportCall
	inflight int
}

// take removes calls from the queue (at least one) up to maxCombinedItems
// items and budget bytes. Called with c.mu held.
func (c *combiner) take(budget int) []*reportCall {
	n, items, size := 0, 0, 0
	for n < len(c.pending) {
		next := c.pending[n]
		nb := callBytes(next)
		if n > 0 && (items+len(next.items) > maxCombinedItems || size+nb > budget) {
			break
		}
		items += len(next.items)
		size += nb
		n++
	}
	batch := c.pending[:n:n]
	c.pending = c.pending[n:]
	return batch
}

// report sends items combined with whatever else is queued and returns
// their results; an error means the round trip failed and may be retried.
func (w *Worker) report(ctx context.Context, items []protocol.ReportItem) ([]protocol.ReportResult, error) {
	call := &reportCall{sc: trace.SpanContextFromContext(ctx), items: items, done: make(chan struct{})}
	c := &w.combiner
	c.mu.Lock()
	c.pending = append(c.pending, call)
	send := c.inflight < maxInflightReports
	if send {
		c.inflight++
	}
	c.mu.Unlock()
	if send {
		for {
			c.mu.Lock()
			if len(c.pending) == 0 {
				c.inflight--
				c.mu.Unlock()
				break
			}
			batch := c.take(int(w.nc.MaxPayload()) - reportEnvelope)
			c.mu.Unlock()
			w.sendCombined(batch)
		}
	}
	select {
	case <-call.done:
		return call.results, call.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// reportEnvelope is the room a combined report needs besides its items.
const reportEnvelope = 4 << 10

// sendCombined makes one round trip for the calls and hands each its share
// of the results. It uses the worker's base context, not a caller's: the
// calls of other runs ride on it. A combined report that turns out larger
// than a message can be is split in two, so one run's large report never
// fails the others.
func (w *Worker) sendCombined(batch []*reportCall) {
	var items []protocol.ReportItem
	for _, c := range batch {
		items = append(items, c.items...)
	}
	w.mu.Lock()
	base := w.base
	w.mu.Unlock()
	// A report of one run travels in that run's trace (the W3C header);
	// one combining several runs belongs to none of their traces.
	if sc := batch[0].sc; sc.IsValid() && oneRun(items) {
		base = trace.ContextWithSpanContext(base, sc)
	}
	results, err := w.reportOnce(base, items)
	if errors.Is(err, errTooLarge) && len(batch) > 1 {
		w.sendCombined(batch[:len(batch)/2])
		w.sendCombined(batch[len(batch)/2:])
		return
	}
	off := 0
	for _, c := range batch {
		n := len(c.items)
		if err == nil {
			c.results = results[off : off+n]
		} else {
			c.err = err
		}
		off += n
		close(c.done)
	}
}

// oneRun reports whether every item is of the same run.
func oneRun(items []protocol.ReportItem) bool {
	for i := range items {
		if items[i].RunID != items[0].RunID {
			return false
		}
	}
	return len(items) > 0
}

// reportOnce makes one report round trip, with ctx's span, if any, as the
// message's W3C traceparent header; an error means try again.
func (w *Worker) reportOnce(ctx context.Context, items []protocol.ReportItem) ([]protocol.ReportResult, error) {
	data, err := protocol.EncodeAs(&protocol.Report{WorkerID: w.cfg.WorkerID, Namespace: w.cfg.Namespace, Items: items}, w.live.encoding())
	if err != nil {
		return nil, err
	}
	if max := w.nc.MaxPayload(); int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errTooLarge, len(data), max)
	}
	subject, target := w.live.route(protocol.SubjectReport(w.cfg.Namespace))
	fctx, landed := w.live.fly(ctx, target)
	defer landed()
	rctx, cancel := context.WithTimeout(fctx, w.cfg.ReportTimeout)
	defer cancel()
	msg, err := w.nc.RequestMsgWithContext(rctx, tracectx.Msg(ctx, subject, data))
	if errors.Is(err, nats.ErrMaxPayload) {
		return nil, fmt.Errorf("%w: %v", errTooLarge, err)
	}
	if err != nil {
		return nil, w.tripFailed(fctx, target, err)
	}
	var reply protocol.ReportReply
	if err := protocol.Decode(msg.Data, &reply); err != nil {
		w.malformed("report reply", msg.Subject, err)
		return nil, err
	}
	if len(reply.Results) != len(items) {
		err := fmt.Errorf("report reply has %d results for %d items", len(reply.Results), len(items))
		w.log.Warn("bad report reply", "err", err)
		return nil, err
	}
	return reply.Results, nil
}
