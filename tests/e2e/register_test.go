package e2e_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsauth"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/reaper"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// registrationBound is how soon after a reaper starts (or a standby takes
// over) the row of a worker that no reaper heard register must say
// everything its registration says.
const registrationBound = 2 * time.Second

// regMaxConcurrency is the slots of the workers of these tests: not the
// default, nor what a heartbeat alone could suggest.
const regMaxConcurrency = 7

// regSystem is a database and a NATS server (with the generated users and
// permissions under KAGZI_E2E_NATS_AUTH) on which the tests start workers
// and reapers as processes of their own, in the order they choose.
// heardReg is a worker's id and when its first registration was heard.
type heardReg struct {
	id uuid.UUID
	at time.Time
}

type regSystem struct {
	t    *testing.T
	url  string
	ns   *testnats.Server
	auth *testnats.AuthServer
	st   *store.Store
	cl   *client.Client
	host string

	mu sync.Mutex
	// regs are the first registrations heard, by the pid they name.
	regs    map[int]heardReg
	changed chan struct{}
}

func newRegSystem(t *testing.T) *regSystem {
	t.Helper()
	s := &regSystem{t: t, url: testdb.New(t), regs: map[int]heardReg{}, changed: make(chan struct{})}
	if natsAuth() {
		s.auth = testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"default"}})
		s.ns = s.auth.Server
	} else {
		s.ns = testnats.Start(t)
	}
	s.st = openStore(t, s.url, nil)
	var err error
	if s.host, err = os.Hostname(); err != nil {
		t.Fatal(err)
	}
	clientNC := s.ns.Connect(t)
	if s.auth != nil {
		clientNC = s.auth.ConnectAs(t, nil, protocol.RoleClient, "default", "")
	}
	s.cl = newClient(t, s.st, clientNC)
	// The test's own connection (the Observer's under authorization)
	// learns each worker's id from the registration it sends first.
	nc := s.ns.Connect(t)
	if _, err := nc.Subscribe(protocol.SubjectWorkerRegisterAll, s.onRegister); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *regSystem) onRegister(m *nats.Msg) {
	var reg protocol.WorkerRegister
	if protocol.Decode(m.Data, &reg) != nil {
		return
	}
	s.mu.Lock()
	if _, ok := s.regs[reg.PID]; !ok {
		s.regs[reg.PID] = heardReg{reg.WorkerID, time.Now()}
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
}

// env is the environment of a child process of role.
func (s *regSystem) env(role string) []string {
	env := []string{"KAGZI_DATABASE_URL=" + s.url, "KAGZI_NATS_URL=" + s.ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info"}
	if s.auth != nil {
		user := natsauth.UserName(role, "default", "worker")
		env = append(env, "KAGZI_NATS_USER="+user, "KAGZI_NATS_PASSWORD="+s.auth.Password(user))
	}
	return env
}

// dispatch starts a dispatcher (with the relay) in the test's process.
func (s *regSystem) dispatch() {
	s.t.Helper()
	nc := s.ns.Connect(s.t)
	if s.auth != nil {
		nc = s.auth.ConnectAs(s.t, nil, protocol.RoleDispatcher, "", "")
	}
	comps := dispatcher.Assemble(dispatcherConfig(s.t, s.url, nil),
		s.st, nc, nil).Components
	for i, c := range comps {
		if err := c.Start(context.Background()); err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(comps[i].Stop)
	}
}

// regWorker is a worker process, the id it registered with and when its
// registration was heard.
type regWorker struct {
	*child
	id         uuid.UUID
	pid        int
	registered time.Time
}

// worker starts a worker process serving FreezeProbe and returns once it
// has sent its registration.
func (s *regSystem) worker(name string) *regWorker {
	s.t.Helper()
	env := append(s.env(protocol.RoleWorker), "KAGZI_MAX_CONCURRENCY="+strconv.Itoa(regMaxConcurrency),
		freezeProbeDirEnv+"="+s.t.TempDir())
	c := startChild(s.t, name, env, frozenWorkerService)
	pid := c.cmd.Process.Pid
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		reg, ok := s.regs[pid]
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return &regWorker{child: c, id: reg.id, pid: pid, registered: reg.at}
		}
		select {
		case <-changed:
		case <-c.exited:
			s.t.Fatalf("%s exited before it registered", name)
		case <-deadline:
			s.t.Fatalf("%s sent no registration", name)
		}
	}
}

// line returns the first line the child logged with msg.
func (c *child) line(msg string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if l.msg == msg {
			return l.raw, true
		}
	}
	return "", false
}

// reaper starts a reaper process and returns it with the time just before
// it was started.
func (s *regSystem) reaper(name string) (*child, time.Time) {
	s.t.Helper()
	at := time.Now()
	return startChild(s.t, name, s.env(protocol.RoleReaper), "reaper"), at
}

// incomplete says what w's row lacks of its registration ("": nothing).
func (s *regSystem) incomplete(ctx context.Context, w *regWorker) string {
	row, err := s.st.WorkersGet(ctx, "default", w.id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "no row"
	case err != nil:
		s.t.Fatal(err)
	}
	want := []store.TypeVersion{{Type: "FreezeProbe"}}
	switch {
	case row.Status != store.WorkerOnline:
		return "status " + string(row.Status)
	case !slices.Equal(row.Types, want):
		return "types " + typesString(row.Types)
	case row.MaxConcurrency != regMaxConcurrency:
		return "max concurrency " + strconv.Itoa(row.MaxConcurrency)
	case row.Hostname != s.host:
		return "hostname " + strconv.Quote(row.Hostname)
	case row.PID != w.pid:
		return "pid " + strconv.Itoa(row.PID)
	}
	return ""
}

func typesString(tvs []store.TypeVersion) string {
	s := "["
	for i, tv := range tvs {
		if i > 0 {
			s += " "
		}
		s += tv.Type + "@" + tv.Version
	}
	return s + "]"
}

// complete waits until the rows of ws are complete and fails unless that
// was within bound of since. It returns how long it took.
func (s *regSystem) complete(ctx context.Context, since time.Time, bound time.Duration, ws ...*regWorker) time.Duration {
	s.t.Helper()
	// Well past the bound, so that a failure says how late it was (the
	// workers of the code before this test repeated their registration
	// every fifth heartbeat: 10 s).
	deadline := since.Add(bound + 15*time.Second)
	for {
		var lacks string
		var who *regWorker
		for _, w := range ws {
			if lacks = s.incomplete(ctx, w); lacks != "" {
				who = w
				break
			}
		}
		took := time.Since(since)
		if who == nil {
			if took > bound {
				s.t.Errorf("the rows were complete %v after the start, want within %v", took.Round(time.Millisecond), bound)
			}
			return took
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s's row is incomplete %v after the start: %s", who.name, took.Round(time.Millisecond), lacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// requireWorker starts a FreezeProbe run that requires a live worker of
// its type: it must be accepted.
func (s *regSystem) requireWorker(ctx context.Context) *client.Handle {
	s.t.Helper()
	h, err := s.cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{RequireWorker: true})
	if err != nil {
		s.t.Fatalf("start requiring a worker: %v", err)
	}
	return h
}

// A worker that starts before any reaper (compose starts workers as soon
// as NATS is healthy) is first known to the reaper from its heartbeats,
// which carry neither its types, slots, host nor pid. Within
// registrationBound of the reaper's start its row must say all of them,
// and a start that requires a worker of its type must be accepted (and
// run).
func TestRegistrationWorkerBeforeReaper(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newRegSystem(t)
	s.dispatch()
	w := s.worker("worker")
	// The order under test: the reaper comes up well after the worker's
	// registration, and between its repetitions by the code before the
	// fix (every fifth heartbeat).
	time.Sleep(5 * time.Second)
	_, started := s.reaper("reaper")
	took := s.complete(ctx, started, registrationBound, w)
	t.Logf("row complete %v after the reaper started", took.Round(time.Millisecond))
	// Told to (the reaper took over, or asked), not at a repetition.
	if line, ok := w.line("registering again"); !ok {
		t.Error("the worker was not told to register again")
	} else {
		t.Logf("worker: %s", line)
	}
	waitAll(t, []*client.Handle{s.requireWorker(ctx)}, 30*time.Second)
}

// The same across a reaper restart: the worker registered with the first
// reaper, which is killed; a second worker starts while no reaper runs;
// within registrationBound of the new reaper's start both rows are
// complete.
func TestRegistrationAcrossReaperRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newRegSystem(t)
	a := s.worker("worker A")
	time.Sleep(5 * time.Second)
	r, started := s.reaper("reaper 1")
	s.complete(ctx, started, registrationBound, a)
	r.signal(t, syscall.SIGKILL)
	<-r.exited
	b := s.worker("worker B")
	time.Sleep(3 * time.Second)
	_, started = s.reaper("reaper 2")
	took := s.complete(ctx, started, registrationBound, a, b)
	t.Logf("rows complete %v after the second reaper started", took.Round(time.Millisecond))
	s.requireWorker(ctx)
}

// Two reapers, and the leader is replaced — stopped (SIGTERM), killed or
// frozen — while a new worker starts: the new leader completes its row
// within registrationBound of taking over, and the row of the worker that
// registered before stays complete, also after a frozen leader resumes.
func TestRegistrationAcrossReaperFailover(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"stopped", syscall.SIGTERM}, {"killed", syscall.SIGKILL}, {"frozen", syscall.SIGSTOP}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			s := newRegSystem(t)
			r1, _ := s.reaper("reaper 1")
			if _, err := r1.await(ctx, "reaper is leader", time.Time{}, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			r2, _ := s.reaper("reaper 2")
			awaitQueued(t, ctx, s.st, reaper.LockKey)
			a := s.worker("worker A")
			s.complete(ctx, time.Now(), registrationBound, a)

			replaced := r1.signal(t, c.sig)
			b := s.worker("worker B")
			led, err := r2.await(ctx, "reaper is leader", replaced, 30*time.Second)
			if err != nil {
				t.Fatalf("standby: %v", err)
			}
			// B may have come up after the takeover.
			since := led
			if b.registered.After(since) {
				since = b.registered
			}
			took := s.complete(ctx, since, registrationBound, a, b)
			t.Logf("standby led %v after the leader was %s; rows complete %v after that (or after B registered)",
				led.Sub(replaced).Round(time.Millisecond), c.name, took.Round(time.Millisecond))
			s.requireWorker(ctx)
			if c.sig == syscall.SIGSTOP {
				resumed := r1.signal(t, syscall.SIGCONT)
				if _, err := r1.await(ctx, "reaper stepped down", resumed, 10*time.Second); err != nil {
					t.Fatalf("resumed leader: %v", err)
				}
				for _, w := range []*regWorker{a, b} {
					if lacks := s.incomplete(ctx, w); lacks != "" {
						t.Errorf("%s's row after the old leader resumed: %s", w.name, lacks)
					}
				}
			}
		})
	}
}
