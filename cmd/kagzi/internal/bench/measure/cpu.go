// Package measure owns how the bench measures: the CPU of processes
// (from /proc) and of Postgres, the NATS server's message counters, and
// the bench's own reads of Postgres's statistics and activity
// (pg_stat_*), which no service makes and so live here rather than in
// pkg/store. The scenarios in package bench decide what to measure and
// when.
package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CPU accounting: what each process spent during a scenario's measured
// phase, read from /proc/<pid>/stat (user + system time, every thread).
// Postgres is counted two ways: the backends serving the bench's
// database (found in pg_stat_activity, sampled while they live so one
// that exits keeps its last reading), and the whole server (the
// postmaster, its live children and every child it reaped), which is
// exact on a cluster of the bench's own (--own-postgres) and an upper
// bound shared with every other user of the machine's server otherwise.

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTick = 10 * time.Millisecond

// CPU is what a scenario's measured phase cost in CPU, by process and per
// run.
type CPU struct {
	// Processes: each Kagzi service process, the bench process (the
	// client, the embedded NATS server, River in the River comparison),
	// the bench database's Postgres backends and the whole server.
	Processes []ProcessCPU `json:"processes"`
	// PostgresUSPerRun is the Postgres CPU per run: the whole server on a
	// cluster of the bench's own, else the bench database's backends.
	PostgresUSPerRun float64 `json:"postgres_us_per_run"`
	// ServicesUSPerRun is everything else: the Kagzi services, the bench
	// process with its client and embedded NATS, PgBouncer (--pgbouncer).
	ServicesUSPerRun float64 `json:"services_us_per_run"`
	// PostgresSource says which Postgres figure PostgresUSPerRun is.
	PostgresSource string `json:"postgres_source"`
	// StatementsPerRun counts top-level statements per run from
	// pg_stat_statements (--own-postgres; zero where it is not loaded).
	StatementsPerRun float64 `json:"statements_per_run,omitempty"`
	// Statements are the most expensive statements (pg_stat_statements).
	Statements []StatementCPU `json:"statements,omitempty"`
	// NATS messages and bytes per run the embedded server received (in)
	// and delivered (out); zero with an external server.
	NATSInPerRun      float64 `json:"nats_in_per_run,omitempty"`
	NATSOutPerRun     float64 `json:"nats_out_per_run,omitempty"`
	NATSInBytesPerRun float64 `json:"nats_in_bytes_per_run,omitempty"`
}

// ProcessCPU is one process (or group) and its CPU.
type ProcessCPU struct {
	Process  string  `json:"process"`
	CPUMS    float64 `json:"cpu_ms"`
	USPerRun float64 `json:"us_per_run"`
}

// StatementCPU is one statement's count and execution time per run.
type StatementCPU struct {
	Statement string  `json:"statement"`
	PerRun    float64 `json:"per_run"`
	ExecUS    float64 `json:"exec_us_per_run"`
	PlanUS    float64 `json:"plan_us_per_run"`
	// Blocks are the shared buffers it touched per run.
	Blocks float64 `json:"blocks_per_run"`
	Nested bool    `json:"nested,omitempty"`
}

// Rows are the CPU's lines of a table.
func (c *CPU) Rows() [][2]string {
	if c == nil {
		return nil
	}
	rows := [][2]string{
		{"cpu per run, postgres", fmt.Sprintf("%.0f µs (%s)", c.PostgresUSPerRun, c.PostgresSource)},
		{"cpu per run, services", fmt.Sprintf("%.0f µs (services, NATS, bench)", c.ServicesUSPerRun)},
	}
	for _, p := range c.Processes {
		rows = append(rows, [2]string{"  " + p.Process, fmt.Sprintf("%.0f ms, %.1f µs/run", p.CPUMS, p.USPerRun)})
	}
	if c.NATSInPerRun > 0 {
		rows = append(rows, [2]string{"nats messages per run", fmt.Sprintf("%.2f in, %.2f out, %.0f bytes in", c.NATSInPerRun, c.NATSOutPerRun, c.NATSInBytesPerRun)})
	}
	if c.StatementsPerRun > 0 {
		rows = append(rows, [2]string{"statements per run", fmt.Sprintf("%.3f (pg_stat_statements, top level)", c.StatementsPerRun)})
		for _, s := range c.Statements {
			tag := ""
			if s.Nested {
				tag = " [in a function]"
			}
			rows = append(rows, [2]string{"  " + s.Statement + tag, fmt.Sprintf("%.3f per run, %.1f µs/run executing, %.1f planning, %.1f blocks", s.PerRun, s.ExecUS, s.PlanUS, s.Blocks)})
		}
	}
	return rows
}

// procTimes reads pid's own CPU and that of its reaped children, and its
// parent.
func procTimes(pid int) (self, children time.Duration, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	ppid = int(n(1))
	return time.Duration(n(11)+n(12)) * clockTick, time.Duration(n(13)+n(14)) * clockTick, ppid, nil
}

// treeTimes is the CPU of pid, its reaped children and its live children
// (with theirs): a whole Postgres server when pid is its postmaster.
func treeTimes(pid int) time.Duration {
	self, reaped, _, err := procTimes(pid)
	if err != nil {
		return 0
	}
	total := self + reaped
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, r, pp, err := procTimes(c)
		if err == nil && pp == pid {
			total += s + r
		}
	}
	return total
}

// LabeledPID is a process the meter follows by name.
type LabeledPID struct {
	Label string
	PID   int
}

// Meter measures the CPU of one phase.
type Meter struct {
	admin  *pgxpool.Pool
	dbName string
	own    bool
	procs  []LabeledPID
	start  map[int]time.Duration
	// Backends of the bench database: first and last reading.
	mu          sync.Mutex
	first, last map[int]time.Duration
	postmaster  int
	server0     time.Duration
	// natsMonitor is the bench's NATS server's monitoring address (""
	// for an external one), nats0 its counters at the start.
	natsMonitor string
	nats0       [3]int64
	stop        chan struct{}
	done        chan struct{}
}

// StartCPU begins measuring: procs by /proc, the database's backends by
// sampling pg_stat_activity every 100 ms until finish.
func StartCPU(ctx context.Context, admin *pgxpool.Pool, dbName string, own bool, natsMonitor string, procs []LabeledPID) *Meter {
	m := &Meter{admin: admin, dbName: dbName, own: own, procs: procs, natsMonitor: natsMonitor, start: map[int]time.Duration{},
		first: map[int]time.Duration{}, last: map[int]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, p := range procs {
		s, _, _, _ := procTimes(p.PID)
		m.start[p.PID] = s
	}
	m.sample(ctx, true)
	m.nats0 = m.natsCounts(ctx)
	if m.postmaster > 0 {
		m.server0 = treeTimes(m.postmaster)
	}
	go func() {
		defer close(m.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				m.sample(ctx, false)
			}
		}
	}()
	return m
}

// sample reads every backend of the database; one seen for the first time
// after the start began during the phase and counts from zero.
func (m *Meter) sample(ctx context.Context, initial bool) {
	bs, err := Activity(ctx, m.admin, m.dbName)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range bs {
		s, _, pp, err := procTimes(b.PID)
		if err != nil {
			continue
		}
		if m.postmaster == 0 {
			m.postmaster = pp
		}
		if _, seen := m.first[b.PID]; !seen {
			if initial {
				m.first[b.PID] = s
			} else {
				m.first[b.PID] = 0
			}
		}
		m.last[b.PID] = s
	}
}

// Finish ends the phase and divides by runs.
func (m *Meter) Finish(ctx context.Context, runs int) *CPU {
	m.sample(ctx, false)
	close(m.stop)
	<-m.done
	n := float64(max(runs, 1))
	per := func(d time.Duration) float64 { return Round2(float64(d.Microseconds()) / n) }
	c := &CPU{}
	byLabel := map[string]time.Duration{}
	var labels []string
	var services time.Duration
	for _, p := range m.procs {
		s, _, _, err := procTimes(p.PID)
		if err != nil {
			continue
		}
		if _, ok := byLabel[p.Label]; !ok {
			labels = append(labels, p.Label)
		}
		d := s - m.start[p.PID]
		byLabel[p.Label] += d
		services += d
	}
	for _, l := range labels {
		c.Processes = append(c.Processes, ProcessCPU{Process: l, CPUMS: float64(byLabel[l].Milliseconds()), USPerRun: per(byLabel[l])})
	}
	m.mu.Lock()
	var backends time.Duration
	for pid, l := range m.last {
		backends += l - m.first[pid]
	}
	nb := len(m.last)
	m.mu.Unlock()
	c.Processes = append(c.Processes, ProcessCPU{Process: fmt.Sprintf("postgres backends of the bench database (%d)", nb),
		CPUMS: float64(backends.Milliseconds()), USPerRun: per(backends)})
	c.PostgresUSPerRun, c.PostgresSource = per(backends), "the bench database's backends"
	if m.postmaster > 0 {
		server := treeTimes(m.postmaster) - m.server0
		label := "postgres, whole server (shared with the machine)"
		if m.own {
			label = "postgres, whole server (the bench's own)"
			c.PostgresUSPerRun, c.PostgresSource = per(server), "the bench's own cluster, every process"
		}
		c.Processes = append(c.Processes, ProcessCPU{Process: label, CPUMS: float64(server.Milliseconds()), USPerRun: per(server)})
	}
	c.ServicesUSPerRun = per(services)
	if m.natsMonitor != "" {
		n1 := m.natsCounts(ctx)
		c.NATSInPerRun = Round2(float64(n1[0]-m.nats0[0]) / n)
		c.NATSOutPerRun = Round2(float64(n1[1]-m.nats0[1]) / n)
		c.NATSInBytesPerRun = Round2(float64(n1[2]-m.nats0[2]) / n)
	}
	return c
}

// natsCounts are the NATS server's messages in and out and bytes in, from
// its /varz.
func (m *Meter) natsCounts(ctx context.Context) [3]int64 {
	if m.natsMonitor == "" {
		return [3]int64{}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.natsMonitor+"/varz", nil)
	if err != nil {
		return [3]int64{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return [3]int64{}
	}
	defer resp.Body.Close()
	var v struct {
		InMsgs  int64 `json:"in_msgs"`
		OutMsgs int64 `json:"out_msgs"`
		InBytes int64 `json:"in_bytes"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return [3]int64{}
	}
	return [3]int64{v.InMsgs, v.OutMsgs, v.InBytes}
}

// AddStatements adds what pg_stat_statements counted in the database since
// the phase began (--own-postgres only: its reset is server-wide).
func (c *CPU) AddStatements(ctx context.Context, admin *pgxpool.Pool, dbName string, runs int) {
	ss, err := StatementStats(ctx, admin, dbName)
	if err != nil || c == nil {
		return
	}
	n := float64(max(runs, 1))
	var top int64
	for _, s := range ss {
		if s.TopLevel {
			top += s.Calls
		}
		if len(c.Statements) < 15 {
			c.Statements = append(c.Statements, StatementCPU{Statement: clip(s.Query, 110), PerRun: Round3(float64(s.Calls) / n),
				ExecUS: Round2(s.ExecMS * 1000 / n), PlanUS: Round2(s.PlanMS * 1000 / n), Blocks: Round2(float64(s.Blocks) / n), Nested: !s.TopLevel})
		}
	}
	sort.SliceStable(c.Statements, func(i, j int) bool {
		return c.Statements[i].ExecUS+c.Statements[i].PlanUS > c.Statements[j].ExecUS+c.Statements[j].PlanUS
	})
	c.StatementsPerRun = Round3(float64(top) / n)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Round2 rounds x to two decimals (JSON stays readable).
func Round2(x float64) float64 {
	if x < 0 {
		return -Round2(-x)
	}
	return float64(int64(x*100+0.5)) / 100
}

// Round3 rounds x to three decimals.
func Round3(x float64) float64 {
	if x < 0 {
		return -Round3(-x)
	}
	return float64(int64(x*1000+0.5)) / 1000
}

// Pct is the p-th percentile (nearest rank) of xs; xs is left as it was.
func Pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
