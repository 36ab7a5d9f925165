package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// The soak scenario: starts at a fixed rate for a long time, a mix of
// steps, sleeps, child runs, step retries and failing runs, with a
// retention of one minute so the reaper deletes finished runs as fast as
// they finish. Every interval it reports the finish rate, dispatch latency,
// CPU per run and the size and dead tuples of the run tables; at the end it
// compares the last minutes with the first ones. A system that holds up
// shows no drift: the latency and the cost of a run do not grow with the
// rows the deletions and vacuums churn through, and the tables stop
// growing once deletion keeps pace with starts.

// soakTables are the tables whose size and dead tuples the soak scenario
// follows: every row a run leaves behind lives in one of them.
var soakTables = []string{"workflow_runs", "step_runs", "workflow_events"}

// Defaults of the soak scenario.
const (
	// DefaultSoakRate is the soak's default start rate: about half of what
	// a 2-core machine sustains of this mix. Measured there, a soak run
	// (three steps on average, a second execution after a sleep or for a
	// parent its children wake, 0.3 child runs, and its deletion) cost
	// 3.4-3.5 ms of CPU in the services and 6.5-7 ms in Postgres: some
	// 10 ms, so 2 cores sustain about 200 runs/s with nothing to spare,
	// and 150/s leaves room for autovacuum, bursts and a backlog to clear.
	DefaultSoakRate     = 150
	DefaultSoakDuration = 30 * time.Minute
	DefaultSoakInterval = time.Minute
	// SoakRetention is the retention period of completed and failed runs
	// (store.MinKeep, the shortest there is).
	SoakRetention = time.Minute
	// SoakDriftPct is the most dispatch p99 and CPU per run may grow from
	// the first minutes to the last ones.
	SoakDriftPct = 10.0
	// SoakGrowthPct is the most the tables may grow over the last
	// minutes: deletion keeps pace with starts.
	SoakGrowthPct = 2.0
)

// Windows of the soak's summary (runs of at least soakLongRun): the
// baseline is minutes 2-7 (the first minute warms up, and nothing is
// deleted before the retention period has passed), the final window the
// last five minutes.
const (
	soakLongRun       = 8 * time.Minute
	soakBaselineFrom  = time.Minute
	soakBaselineTo    = 7 * time.Minute
	soakFinalWindow   = 5 * time.Minute
	soakProbesPerSec  = 50
	soakProbeFetchers = 4
	// soakOrphanAge: a finished run the bench did not start (a child) is
	// counted once it is this old, by when the start of a run of the
	// bench's own would have returned.
	soakOrphanAge = 2 * time.Second
	// soakDoneMemory is how long a finished run is remembered, so a
	// repeated finish event is not counted again.
	soakDoneMemory = 2 * time.Minute
)

// soakMix is the share of each kind of Soak run, in twentieths.
var soakMix = []struct {
	kind  string
	share int
}{{SoakSteps, 10}, {SoakSleep, 3}, {SoakChildren, 3}, {SoakRetry, 2}, {SoakFail, 2}}

// SoakMix describes the mix of runs the soak scenario starts.
const SoakMix = "50% 3 steps, 15% step+sleep 200-1000 ms+step, 15% step+2 child runs, 10% step+step retried once, 10% step+failing step (run FAILED)"

func (o *Options) soakDefaults() {
	if o.Rate <= 0 {
		o.Rate = DefaultSoakRate
	}
	if o.Duration <= 0 {
		o.Duration = DefaultSoakDuration
	}
	if o.Interval <= 0 {
		o.Interval = DefaultSoakInterval
	}
	o.Interval = min(o.Interval, o.Duration)
}

// SoakResult is the figures of the soak scenario.
type SoakResult struct {
	Scenario    string  `json:"scenario"`
	Rate        float64 `json:"rate"`
	Mix         string  `json:"mix"`
	DurationSec float64 `json:"duration_sec"`
	IntervalSec float64 `json:"interval_sec"`
	Workers     int     `json:"workers"`
	Dispatchers int     `json:"dispatchers"`
	// RetentionSec is the retention of completed and failed runs.
	RetentionSec float64 `json:"retention_sec"`
	// Autovacuum is the server's setting; off, the tables keep their
	// dead tuples and cannot stop growing.
	Autovacuum bool `json:"autovacuum"`
	// Started, Finished and Failed count the runs the bench started;
	// Children the child runs that finished.
	Started  int `json:"started"`
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
	Children int `json:"children"`
	// StartBytes is the tables' size before the first start.
	StartBytes int64          `json:"start_bytes"`
	Intervals  []SoakInterval `json:"intervals"`
	SoakSummary
}

// SoakInterval is one report line.
type SoakInterval struct {
	// N numbers the interval from 1 (the minute, with 1-minute intervals).
	N      int     `json:"n"`
	EndSec float64 `json:"end_sec"`
	// Started, Finished and Failed count the bench's runs, Children the
	// child runs that finished, in the interval.
	Started  int `json:"started"`
	Finished int `json:"finished"`
	Failed   int `json:"failed"`
	Children int `json:"children"`
	// Duplicates are repeated finish events of runs counted already.
	Duplicates int     `json:"duplicate_finish_events"`
	RunsPerSec float64 `json:"runs_per_sec"`
	// Dispatch latency (start returned -> code running) of the runs whose
	// first-run time was read in the interval (a sample, Probes of them).
	DispatchP50ms float64 `json:"dispatch_p50_ms"`
	DispatchP99ms float64 `json:"dispatch_p99_ms"`
	Probes        int     `json:"probes"`
	// ServicesUSPerRun is the CPU of the Kagzi service processes (and the
	// bench's NATS server) per run finished in the interval; PostgresUSPerRun
	// that of the bench database's backends.
	ServicesUSPerRun float64 `json:"services_us_per_run"`
	PostgresUSPerRun float64 `json:"postgres_us_per_run"`
	// CPU splits it by process.
	CPU []measure.ProcessCPU `json:"cpu,omitempty"`
	// SizeBytes, DeadTuples, LiveTuples and Vacuums of the run tables at
	// the interval's end (TableStats).
	SizeBytes  int64 `json:"size_bytes"`
	DeadTuples int64 `json:"dead_tuples"`
	LiveTuples int64 `json:"live_tuples"`
	Vacuums    int64 `json:"vacuums"`
}

// SoakSummary compares the final window with the baseline.
type SoakSummary struct {
	// Baseline and Final name the windows compared.
	Baseline string `json:"baseline"`
	Final    string `json:"final"`
	// Note says why the windows are not the usual ones.
	Note string `json:"note,omitempty"`
	// Means of the intervals of each window.
	BaselineP99ms     float64 `json:"baseline_dispatch_p99_ms"`
	FinalP99ms        float64 `json:"final_dispatch_p99_ms"`
	BaselineUSPerRun  float64 `json:"baseline_services_us_per_run"`
	FinalUSPerRun     float64 `json:"final_services_us_per_run"`
	BaselineSizeBytes float64 `json:"baseline_size_bytes"`
	FinalSizeBytes    float64 `json:"final_size_bytes"`
	P99ChangePct      float64 `json:"dispatch_p99_change_pct"`
	USPerRunChangePct float64 `json:"services_us_per_run_change_pct"`
	SizeChangePct     float64 `json:"size_change_pct"`
	FinalGrowthPct    float64 `json:"final_growth_pct"`
	Criterion         string  `json:"criterion"`
	Met               bool    `json:"met"`
}

// Rows implements Detail.
func (r *SoakResult) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"load", fmt.Sprintf("%.0f starts/s for %.0f s: %s", r.Rate, r.DurationSec, r.Mix)},
		{"processes", fmt.Sprintf("%d dispatcher, 1 scheduler, 1 reaper, %d workers", r.Dispatchers, r.Workers)},
		{"retention", fmt.Sprintf("%.0f s (completed and failed)", r.RetentionSec)},
		{"autovacuum", autovacuumNote(r.Autovacuum)},
		{"runs", fmt.Sprintf("%d started, %d finished (%d failed), %d child runs", r.Started, r.Finished, r.Failed, r.Children)},
		{"compared", r.compared()},
		{"dispatch p99", fmt.Sprintf("%.2f -> %.2f ms (%+.1f %%)", r.BaselineP99ms, r.FinalP99ms, r.P99ChangePct)},
		{"cpu per run, services", fmt.Sprintf("%.0f -> %.0f µs (%+.1f %%)", r.BaselineUSPerRun, r.FinalUSPerRun, r.USPerRunChangePct)},
		{"size", fmt.Sprintf("%s -> %s (%+.1f %%); %+.1f %% over the final window", mb(r.BaselineSizeBytes), mb(r.FinalSizeBytes), r.SizeChangePct, r.FinalGrowthPct)},
		{"verdict", fmt.Sprintf("%s (%s)", verdict(r.Met), r.Criterion)},
	}
}

func (r *SoakResult) compared() string {
	c := fmt.Sprintf("%s against %s", r.Final, r.Baseline)
	if r.Note != "" {
		c += " (" + r.Note + ")"
	}
	return c
}

func autovacuumNote(on bool) string {
	if on {
		return "on"
	}
	return "OFF: " + soakNoAutovacuum
}

func mb(b float64) string { return fmt.Sprintf("%.1f MB", b/(1<<20)) }

// line is the interval's report line.
func (iv SoakInterval) line(every time.Duration) string {
	at := fmt.Sprintf("minute %3d", iv.N)
	if every != time.Minute {
		at = fmt.Sprintf("t %6.0fs", iv.EndSec)
	}
	return fmt.Sprintf("%s  runs/s %7.1f  dispatch p50 %7.2f ms  p99 %8.2f ms  cpu/run %6.0f µs (postgres %6.0f µs)  size %8.1f MB  dead tuples %8d  (failed %d, children %d, probes %d)",
		at, iv.RunsPerSec, iv.DispatchP50ms, iv.DispatchP99ms, iv.ServicesUSPerRun, iv.PostgresUSPerRun,
		float64(iv.SizeBytes)/(1<<20), iv.DeadTuples, iv.Failed, iv.Children, iv.Probes)
}

// soakNoAutovacuum warns that the server does not vacuum.
const soakNoAutovacuum = "autovacuum is off on this server: nothing reclaims the dead tuples of deleted runs, so the tables cannot stop growing (--own-postgres runs on a cluster with autovacuum on)"

// soakRetention sets the namespace's retention to SoakRetention.
func (e *env) soakRetention(ctx context.Context) error {
	keep := SoakRetention
	_, err := e.cl.SetRetention(ctx, client.RetentionOptions{Completed: &keep, Failed: &keep})
	return err
}

func (e *env) soak(ctx context.Context) (Detail, error) {
	o := e.o
	if err := e.openAdmin(ctx); err != nil {
		return nil, err
	}
	r := &SoakResult{Scenario: "soak", Rate: o.Rate, Mix: SoakMix, DurationSec: o.Duration.Seconds(), IntervalSec: o.Interval.Seconds(),
		Workers: len(e.x.workers), Dispatchers: o.Dispatchers, RetentionSec: SoakRetention.Seconds()}
	t := newSoakTracker(e.cl, max(1, int(o.Rate/soakProbesPerSec)))
	sub, err := e.nc.Subscribe(protocol.SubjectDoneAll, func(m *nats.Msg) {
		var f protocol.RunFinished
		if protocol.Decode(m.Data, &f) == nil {
			t.finished(f.RunID, f.Status, time.Now())
		}
	})
	if err != nil {
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, -1)
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.Flush(); err != nil {
		return nil, err
	}
	st0, err := measure.ReadTableStats(ctx, e.pool, soakTables)
	if err != nil {
		return nil, err
	}
	r.StartBytes = st0.Bytes
	if r.Autovacuum, err = e.st.ServerAutovacuum(ctx); err != nil {
		return nil, err
	}

	// The bench process is left out of the CPU (unless it runs the
	// dispatcher): its probes' reads are measurement, not the system's
	// work.
	var procs []measure.LabeledPID
	for _, p := range e.cpuProcs() {
		if p.PID != os.Getpid() || o.CountStatements {
			procs = append(procs, p)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range soakProbeFetchers {
		wg.Add(1)
		go func() { defer wg.Done(); t.fetch(rctx) }()
	}
	begin := time.Now()
	end := begin.Add(o.Duration)
	startErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); startErr <- e.soakStart(rctx, t, begin, end) }()
	defer func() { cancel(); wg.Wait() }()

	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "soak: %.0f starts/s for %v, a line every %v (%s); retention %v\n", o.Rate, o.Duration, o.Interval, SoakMix, SoakRetention)
		if !r.Autovacuum {
			fmt.Fprintln(o.Progress, "soak: "+soakNoAutovacuum)
		}
	}
	meter := measure.StartCPU(rctx, e.x.admin, e.dbName, e.o.OwnPostgres, e.natsMonitor, procs)
	prev := begin
	for n := 1; ; n++ {
		at := begin.Add(time.Duration(n) * o.Interval)
		last := !at.Before(end)
		if last {
			at = end
		}
		select {
		case <-time.After(time.Until(at)):
		case err := <-startErr:
			if err != nil {
				return nil, err
			}
			startErr = nil // the starts ended with the duration; keep reporting
			if err := sleepCtx(ctx, time.Until(at)); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		now := time.Now()
		c := t.rollover(now, last)
		cpu := meter.Finish(rctx, c.finished)
		if !last {
			meter = measure.StartCPU(rctx, e.x.admin, e.dbName, e.o.OwnPostgres, e.natsMonitor, procs)
		}
		ts, err := measure.ReadTableStats(ctx, e.pool, soakTables)
		if err != nil {
			return nil, err
		}
		secs := max(now.Sub(prev).Seconds(), 1e-3)
		prev = now
		iv := SoakInterval{N: n, EndSec: measure.Round2(now.Sub(begin).Seconds()), Started: c.started, Finished: c.finished, Failed: c.failed,
			Children: c.children, Duplicates: c.duplicates, RunsPerSec: measure.Round2(float64(c.finished) / secs), Probes: len(c.latency),
			DispatchP50ms: measure.Round2(pct(c.latency, 50)), DispatchP99ms: measure.Round2(pct(c.latency, 99)),
			ServicesUSPerRun: cpu.ServicesUSPerRun, PostgresUSPerRun: cpu.PostgresUSPerRun, CPU: cpu.Processes,
			SizeBytes: ts.Bytes, DeadTuples: ts.Dead, LiveTuples: ts.Live, Vacuums: ts.Vacuums}
		if c.finished == 0 {
			iv.ServicesUSPerRun, iv.PostgresUSPerRun, iv.CPU = 0, 0, nil
		}
		r.Intervals = append(r.Intervals, iv)
		r.Started += c.started
		r.Finished += c.finished
		r.Failed += c.failed
		r.Children += c.children
		if o.Progress != nil {
			fmt.Fprintln(o.Progress, iv.line(o.Interval))
		}
		if last {
			break
		}
	}
	if t.dropped.Load() > 0 {
		o.Log.Warn("soak: probes dropped (the fetchers fell behind)", "probes", t.dropped.Load())
	}
	r.SoakSummary = summarizeSoak(r.Intervals, r.StartBytes, o.Interval, o.Duration)
	return r, nil
}

// soakStart starts Soak runs at o.Rate per second from begin until end:
// every 10 ms, StartMany of the runs due by then, so the rate holds when
// the ticker is late on a busy machine.
func (e *env) soakStart(ctx context.Context, t *soakTracker, begin, end time.Time) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(uint64(begin.UnixNano()), 1))
	started := 0
	for {
		now := time.Now()
		if !now.Before(end) {
			return nil
		}
		if due := int(now.Sub(begin).Seconds()*e.o.Rate) + 1 - started; due > 0 {
			reqs := make([]client.StartRequest, min(due, 1000))
			for i := range reqs {
				in := SoakInput{Kind: soakKind(rng.IntN(20))}
				if in.Kind == SoakSleep {
					in.SleepMS = sleepMinMS + rng.Int64N(sleepMaxMS-sleepMinMS+1)
				}
				reqs[i] = client.StartRequest{Type: SoakType, Input: in}
			}
			hs, err := e.cl.StartMany(ctx, reqs)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			t.started(hs, time.Now(), rng)
			started += len(reqs)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// soakKind is the kind of Soak run for a draw of 0-19.
func soakKind(twentieth int) string {
	for _, m := range soakMix {
		if twentieth < m.share {
			return m.kind
		}
		twentieth -= m.share
	}
	return SoakSteps
}

// soakCounts are what one interval saw.
type soakCounts struct {
	started, finished, failed, children int
	// duplicates are finish events of runs counted already.
	duplicates int
	latency    []float64
}

// soakTracker follows the runs the soak started until they finish, counts
// them per interval and reads the first-run time of a sample of them.
type soakTracker struct {
	cl          *client.Client
	sampleEvery int
	mu          sync.Mutex
	// live are the started runs not finished yet, with when their start
	// returned and whether their dispatch latency is read.
	live map[uuid.UUID]soakLive
	// orphans are finished runs not (yet) known to be the bench's: child
	// runs, or a run whose finish came before its start returned.
	orphans map[uuid.UUID]soakOrphan
	// done are the runs counted as finished, with when: a run's finish
	// event can come more than once.
	done    map[uuid.UUID]time.Time
	cur     soakCounts
	probes  chan soakProbe
	dropped atomic.Int64
}

type soakLive struct {
	at    time.Time
	probe bool
}

type soakOrphan struct {
	at     time.Time
	status string
}

type soakProbe struct {
	id uuid.UUID
	at time.Time
}

func newSoakTracker(cl *client.Client, sampleEvery int) *soakTracker {
	return &soakTracker{cl: cl, sampleEvery: sampleEvery, live: map[uuid.UUID]soakLive{}, orphans: map[uuid.UUID]soakOrphan{},
		done: map[uuid.UUID]time.Time{}, probes: make(chan soakProbe, 4096)}
}

// started records runs whose start returned at; a random one in
// sampleEvery is probed, whatever its kind.
func (t *soakTracker) started(hs []*client.Handle, at time.Time, rng *rand.Rand) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range hs {
		t.cur.started++
		l := soakLive{at: at, probe: rng.IntN(t.sampleEvery) == 0}
		if o, ok := t.orphans[h.RunID]; ok {
			delete(t.orphans, h.RunID)
			t.finishLocked(h.RunID, l, o.status, o.at)
			continue
		}
		t.live[h.RunID] = l
	}
}

// finished records a run's finish event.
func (t *soakTracker) finished(id uuid.UUID, status string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, counted := t.done[id]; counted {
		t.cur.duplicates++
		return
	}
	l, ok := t.live[id]
	if !ok {
		if _, seen := t.orphans[id]; seen {
			t.cur.duplicates++
		} else {
			t.orphans[id] = soakOrphan{at: at, status: status}
		}
		return
	}
	delete(t.live, id)
	t.finishLocked(id, l, status, at)
}

func (t *soakTracker) finishLocked(id uuid.UUID, l soakLive, status string, at time.Time) {
	t.done[id] = at
	t.cur.finished++
	if status != "COMPLETED" {
		t.cur.failed++
		return
	}
	if !l.probe {
		return
	}
	select {
	case t.probes <- soakProbe{id: id, at: l.at}:
	default:
		t.dropped.Add(1)
	}
}

// fetch reads the first-run time of probed runs (their output) until ctx
// ends. The retention period leaves a minute for it.
func (t *soakTracker) fetch(ctx context.Context) {
	for {
		var p soakProbe
		select {
		case <-ctx.Done():
			return
		case p = <-t.probes:
		}
		run, err := t.cl.Get(ctx, p.id)
		if err != nil {
			continue
		}
		var out SoakOutput
		if json.Unmarshal(run.Output, &out) != nil || out.FirstNS <= 0 {
			continue
		}
		t.mu.Lock()
		t.cur.latency = append(t.cur.latency, ms(time.Unix(0, out.FirstNS).Sub(p.at)))
		t.mu.Unlock()
	}
}

// rollover ends an interval at now and returns what it saw; orphans old
// enough to be nobody's start, and at the last interval (no start is
// pending) every one, are counted as child runs.
func (t *soakTracker) rollover(now time.Time, last bool) soakCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, o := range t.orphans {
		if last || now.Sub(o.at) >= soakOrphanAge {
			delete(t.orphans, id)
			t.done[id] = o.at
			t.cur.children++
		}
	}
	for id, at := range t.done {
		if now.Sub(at) > soakDoneMemory {
			delete(t.done, id)
		}
	}
	c := t.cur
	t.cur = soakCounts{}
	return c
}

// summarizeSoak compares the final window with the baseline (see the
// window constants): for a run of at least soakLongRun the mean of the
// last five minutes with that of minutes 2-7, else the last interval with
// the first. The verdict is met when dispatch p99 and CPU per run grew by
// at most SoakDriftPct (a fall is no drift) and the tables grew by less
// than SoakGrowthPct over the final window: from the end of the interval
// before it (startBytes if none) to the end of the last.
func summarizeSoak(ivs []SoakInterval, startBytes int64, every, total time.Duration) SoakSummary {
	var s SoakSummary
	if len(ivs) == 0 {
		s.Criterion = "no interval"
		return s
	}
	var base, final []SoakInterval
	firstFinal := len(ivs) - 1
	if total >= soakLongRun {
		for i, iv := range ivs {
			// Nominal ends: the windows are times of the run, whatever
			// the interval.
			at := min(time.Duration(iv.N)*every, total)
			if at > soakBaselineFrom && at <= soakBaselineTo {
				base = append(base, iv)
			}
			if at > total-soakFinalWindow {
				if final == nil {
					firstFinal = i
				}
				final = append(final, iv)
			}
		}
		s.Baseline, s.Final = "minutes 2-7", "the last 5 minutes"
	}
	if len(base) == 0 || len(final) == 0 {
		base, final, firstFinal = ivs[:1], ivs[len(ivs)-1:], len(ivs)-1
		s.Baseline, s.Final = "the first interval", "the last interval"
		if total < soakLongRun {
			s.Note = fmt.Sprintf("a run shorter than %v compares its last interval with its first, not the last 5 minutes with minutes 2-7", soakLongRun)
		}
	}
	mean := func(ws []SoakInterval, f func(SoakInterval) float64) float64 {
		var sum float64
		for _, w := range ws {
			sum += f(w)
		}
		return sum / float64(len(ws))
	}
	change := func(a, b float64) float64 {
		if a == 0 {
			return 0
		}
		return measure.Round2((b - a) / a * 100)
	}
	p99 := func(w SoakInterval) float64 { return w.DispatchP99ms }
	cpu := func(w SoakInterval) float64 { return w.ServicesUSPerRun }
	size := func(w SoakInterval) float64 { return float64(w.SizeBytes) }
	s.BaselineP99ms, s.FinalP99ms = measure.Round2(mean(base, p99)), measure.Round2(mean(final, p99))
	s.BaselineUSPerRun, s.FinalUSPerRun = measure.Round2(mean(base, cpu)), measure.Round2(mean(final, cpu))
	s.BaselineSizeBytes, s.FinalSizeBytes = mean(base, size), mean(final, size)
	s.P99ChangePct = change(s.BaselineP99ms, s.FinalP99ms)
	s.USPerRunChangePct = change(s.BaselineUSPerRun, s.FinalUSPerRun)
	s.SizeChangePct = change(s.BaselineSizeBytes, s.FinalSizeBytes)
	before := startBytes
	if firstFinal > 0 {
		before = ivs[firstFinal-1].SizeBytes
	}
	s.FinalGrowthPct = change(float64(before), float64(ivs[len(ivs)-1].SizeBytes))
	s.Met = s.P99ChangePct <= SoakDriftPct && s.USPerRunChangePct <= SoakDriftPct && s.FinalGrowthPct < SoakGrowthPct
	s.Criterion = fmt.Sprintf("dispatch p99 and cpu per run grew <= %.0f %%, size grew < %.0f %% over the final window", SoakDriftPct, SoakGrowthPct)
	return s
}
