package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle/process"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/services/dispatcher"
	workersvc "github.com/kagzi/kagzi/services/worker"
	"github.com/kagzi/kagzi/tests/devserver"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// secured is a system on a NATS server with the generated users and
// permissions: services connect as their roles; no worker runs.
type secured struct {
	url  string
	auth *testnats.AuthServer
	srv  *devserver.Server
	cl   *client.Client
}

func startSecured(t *testing.T, tls bool) *secured {
	t.Helper()
	return startSecuredOn(t, testdb.New(t), tls, nil)
}

// startSecuredOn is startSecured on the database at dbURL, with workers
// with the workflows register adds, if given.
func startSecuredOn(t *testing.T, dbURL string, tls bool, register func(*worker.Worker) error) *secured {
	t.Helper()
	s := &secured{url: dbURL}
	workers := -1
	if register != nil {
		workers = 1
	}
	s.auth = testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"default"}, TLS: tls})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := devserver.Start(ctx, devserver.Options{DatabaseURL: s.url, NATSURL: s.auth.URL(), Workers: workers, Register: register,
		NATSOptions: func(role string) []nats.Option { return s.auth.Options(t, role, "default", "worker") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	s.srv = srv
	s.cl = newClient(t, srv.Store, s.auth.ConnectAs(t, nil, protocol.RoleClient, "default", ""))
	return s
}

// TestEngineRunsWithTLS: with TLS and client certificates required, the
// services, the client and a worker service configured from the
// KAGZI_NATS_* settings run workflows to the end; a connection without a
// client certificate, or without TLS, is refused.
func TestEngineRunsWithTLS(t *testing.T) {
	t.Parallel()
	s := startSecured(t, true)
	cfg := defaults[workersvc.Config](t)
	cfg.MaxConcurrency, cfg.HeartbeatInterval, cfg.WaitTimeout, cfg.DrainTimeout, cfg.HTTPAddr = 4, time.Second, 5*time.Second, time.Second, ""
	cfg.NATSURL, cfg.LogLevel = s.auth.URL(), "error"
	cfg.NATSAuth = s.auth.TLS
	cfg.NATSUser, cfg.NATSPassword = "worker-default-worker", s.auth.Password("worker-default-worker")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workersvc.Run(ctx, cfg, process.Logger("error"), threeSteps(newCounter())) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	for i := 0; i < 5; i++ {
		h, err := s.cl.Start(wctx, "Three", i, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out int
		if err := h.Result(wctx, &out); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if out != i+3 {
			t.Fatalf("run %d: %d, want %d", i, out, i+3)
		}
	}
	// Without a client certificate, and without TLS at all.
	noCert := s.auth.TLS
	noCert.NATSTLSCert, noCert.NATSTLSKey = "", ""
	noCert.NATSUser, noCert.NATSPassword = "client-default", s.auth.Password("client-default")
	opts, err := noCert.Options()
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(s.auth.URL(), opts...); err == nil {
		nc.Close()
		t.Error("connected without a client certificate")
	}
	if nc, err := nats.Connect(s.auth.URL(), nats.UserInfo("client-default", s.auth.Password("client-default"))); err == nil {
		nc.Close()
		t.Error("connected without TLS")
	}
}

// TestReportUnderAnotherLeaseIsRefused: a worker that holds a run's lease
// (asked the real dispatcher for it as its role) reports with a wrong
// lease token and is refused; with the right one the run completes.
func TestReportUnderAnotherLeaseIsRefused(t *testing.T) {
	t.Parallel()
	s := startSecured(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := s.cl.Start(ctx, "Held", 1, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	w := s.auth.ConnectAs(t, errs, protocol.RoleWorker, "default", "worker")
	inbox := w.NewInbox()
	if !strings.HasPrefix(inbox, protocol.WorkerInbox("default", "worker")+".") {
		t.Fatalf("inbox %s is not under the worker's prefix", inbox)
	}
	sub, err := w.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	wid := uuid.New()
	req, _ := protocol.Encode(&protocol.WorkRequest{WorkerID: wid, Namespace: "default", Queue: "default", Credits: 1,
		Types: []protocol.TypeVersion{{Type: "Held"}}, Seq: 1, WaitMS: 10000})
	if err := w.PublishRequest(protocol.SubjectWork("default", "default"), inbox, req); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var d protocol.Delivery
	if err := protocol.Decode(msg.Data, &d); err != nil || len(d.Runs) != 1 || d.Runs[0].RunID != h.RunID {
		t.Fatalf("delivery %+v: %v", d, err)
	}
	ack, _ := protocol.Encode(&protocol.DeliveryAck{Accepted: true})
	if err := msg.Respond(ack); err != nil {
		t.Fatal(err)
	}
	report := func(token int64) protocol.ReportResult {
		t.Helper()
		now := time.Now().UTC()
		data, err := protocol.Encode(&protocol.Report{WorkerID: wid, Namespace: "default", Items: []protocol.ReportItem{{
			Kind: protocol.ReportRunCompleted, RunID: h.RunID, LeaseToken: token, Output: json.RawMessage(`7`), FinishedAt: &now}}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := w.Request(protocol.SubjectReport("default"), data, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.ReportReply
		if err := protocol.Decode(m.Data, &r); err != nil || len(r.Results) != 1 {
			t.Fatalf("reply %+v: %v", r, err)
		}
		return r.Results[0]
	}
	if r := report(d.Runs[0].LeaseToken + 1); r.Code != protocol.ResultLeaseLost {
		t.Fatalf("report under a wrong lease: %+v, want %s", r, protocol.ResultLeaseLost)
	}
	if r := report(d.Runs[0].LeaseToken); r.Code != protocol.ResultOK {
		t.Fatalf("report under the lease: %+v", r)
	}
	var out int
	if err := h.Result(ctx, &out); err != nil || out != 7 {
		t.Fatalf("result %d, %v", out, err)
	}
	select {
	case err := <-errs:
		t.Fatalf("worker: %v", err)
	default:
	}
}

// TestEngineRunsAsTheRuntimeRole: the services, workers and client run a
// workflow, a schedule and a cancel on a database they reach as the
// runtime role (rows only), with NATS authorization on.
func TestEngineRunsAsTheRuntimeRole(t *testing.T) {
	t.Parallel()
	d := testdb.NewRoles(t)
	s := startSecuredOn(t, d.RuntimeURL, false, threeSteps(newCounter()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := s.cl.Start(ctx, "Three", 2, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out int
	if err := h.Result(ctx, &out); err != nil || out != 5 {
		t.Fatalf("result %d, %v", out, err)
	}
	sc, err := s.cl.CreateSchedule(ctx, "Three", 1, client.ScheduleOptions{Cron: "@hourly"})
	if err != nil {
		t.Fatal(err)
	}
	fired, err := s.cl.TriggerSchedule(ctx, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := fired.Result(ctx, &out); err != nil || out != 4 {
		t.Fatalf("triggered run: %d, %v", out, err)
	}
}

// TestServiceWithBadCredentialsFailsAtStart: a dispatcher whose NATS
// password is wrong exits at start, saying why, without the password.
func TestServiceWithBadCredentialsFailsAtStart(t *testing.T) {
	t.Parallel()
	auth := testnats.StartAuth(t, testnats.AuthOptions{})
	cfg := dispatcherConfig(t, testdb.New(t), nil)
	cfg.NATSURL, cfg.HTTPAddr = auth.URL(), ""
	cfg.MaxClaim, cfg.ReportWriters, cfg.Relay = 10, 1, false
	cfg.NATSUser, cfg.NATSPassword = "dispatcher", "not-"+auth.Password("dispatcher")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := dispatcher.Run(ctx, cfg, process.Logger("error"))
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("dispatcher with a wrong password: %v, want an authorization violation", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the dispatcher did not fail at start")
	}
	if strings.Contains(err.Error(), cfg.NATSPassword) {
		t.Errorf("the error shows the password: %v", err)
	}
}
