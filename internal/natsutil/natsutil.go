// Package natsutil holds the small NATS plumbing shared by Kagzi's
// components that do not own their connection: reacting to reconnects,
// answering dropped messages, counting malformed ones.
package natsutil

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// mu serialises the read-modify-write of a connection's error handler
// (OnSlowConsumer).
var mu sync.Mutex

// OnReconnect runs fn each time nc is connected again after losing its
// server: several components share one connection in `kagzi dev`, and
// each must read its backlog after a reconnect (messages sent while the
// connection was down are gone). It listens to the connection's status
// changes, leaving the reconnect handler the application set untouched,
// and runs fn in a goroutine of its own that ends when nc is closed or
// stop is called. stop returns once fn no longer runs; it is safe to call
// twice, and must not be called from fn.
func OnReconnect(nc *nats.Conn, fn func()) (stop func()) {
	return OnStatus(nc, func(nats.Status) { fn() }, nats.CONNECTED)
}

// OnStatus runs fn, in order, with each change of nc's status to one of
// statuses, as OnReconnect does: in a goroutine of its own that ends when
// nc is closed (after fn saw CLOSED, if listed) or stop is called.
func OnStatus(nc *nats.Conn, fn func(nats.Status), statuses ...nats.Status) (stop func()) {
	listed := map[nats.Status]bool{}
	for _, s := range statuses {
		listed[s] = true
	}
	ch := nc.StatusChanged(append(statuses, nats.CLOSED)...)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer nc.RemoveStatusListener(ch)
		if nc.IsClosed() {
			return
		}
		for {
			select {
			case <-quit:
				return
			case s, ok := <-ch:
				if !ok {
					return
				}
				if listed[s] {
					fn(s)
				}
				if s == nats.CLOSED {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// Malformed counts, logs and drops NATS messages a component cannot take
// (bad JSON, a wrong version, a subject that does not match the body): the
// same for every service, so an operator finds them by one log message
// and one metric, kagzi.messages.malformed by component.
type Malformed struct {
	n       atomic.Int64
	log     *slog.Logger
	level   slog.Level
	counter metric.Int64Counter
	attrs   metric.MeasurementOption
}

// NewMalformed returns the counter of component (dispatcher, relay,
// scheduler, reaper), logging each drop at level; mp defaults to the otel
// global.
func NewMalformed(component string, log *slog.Logger, level slog.Level, mp metric.MeterProvider) *Malformed {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, _ := mp.Meter("github.com/kagzi/kagzi/natsutil").Int64Counter("kagzi.messages.malformed",
		metric.WithDescription("NATS messages dropped as malformed, by component."))
	return &Malformed{log: log.With("component", component), level: level, counter: c,
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("component", component)))}
}

// Drop counts and logs one malformed message on subject ("" when it did
// not come from NATS, e.g. a Postgres notification).
func (m *Malformed) Drop(ctx context.Context, subject string, err error) {
	m.n.Add(1)
	if m.counter != nil {
		m.counter.Add(ctx, 1, m.attrs)
	}
	if subject == "" {
		m.log.Log(ctx, m.level, "dropping malformed message", "err", err)
		return
	}
	m.log.Log(ctx, m.level, "dropping malformed message", "subject", subject, "err", err)
}

// Count is how many messages were dropped.
func (m *Malformed) Count() int64 { return m.n.Load() }
