package natsutil_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/natsutil"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A dispatcher whose lease is shorter than the reaper's is reported once;
// one with an equal lease, or announcing none, is not.
func TestCheckLeasesReportsAShorterDispatcherLeaseOnce(t *testing.T) {
	t.Parallel()
	s := testnats.Start(t)
	nc := s.Connect(t)
	bad := make(chan error, 4)
	reaper := s.Connect(t)
	sub, err := natsutil.CheckLeases(reaper, config.Lease{Duration: 30 * time.Second}, func(err error) { bad <- err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Drain() })
	if err := reaper.Flush(); err != nil {
		t.Fatal(err)
	}
	beacon := func(id uuid.UUID, lease string) {
		t.Helper()
		data, err := protocol.Encode(&protocol.DispatcherBeacon{DispatcherID: id, IntervalMS: 1000})
		if err != nil {
			t.Fatal(err)
		}
		m := &nats.Msg{Subject: protocol.SubjectDispatcherBeacon, Data: data, Header: nats.Header{}}
		if lease != "" {
			m.Header.Set(protocol.HeaderLease, lease)
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	ok, short := uuid.New(), uuid.New()
	beacon(ok, protocol.FormatLease(30*time.Second))
	beacon(ok, "")
	beacon(short, protocol.FormatLease(10*time.Second))
	beacon(short, protocol.FormatLease(10*time.Second))
	// A last beacon that is reported marks the end of the ones before.
	last := uuid.New()
	beacon(last, protocol.FormatLease(time.Second))
	var got []error
	for len(got) < 2 {
		select {
		case err := <-bad:
			got = append(got, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("reported %v, want the two dispatchers with shorter leases", got)
		}
	}
	if !errors.Is(got[0], config.ErrInvalid) || !strings.Contains(got[0].Error(), short.String()) ||
		!strings.Contains(got[1].Error(), last.String()) {
		t.Fatalf("reported %v", got)
	}
	select {
	case err := <-bad:
		t.Fatalf("reported again: %v", err)
	default:
	}
}
