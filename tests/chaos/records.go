package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/tests/testflows"
)

// Record is one line of a worker's chaos log (see testflows.Chaos): an
// execution of a run that began (X) or ended (Y), or a step function that
// began (B) or finished its work (E).
type Record struct {
	Kind byte
	At   time.Time
	Run  uuid.UUID
	Exec string
	PID  int
	// Step is the step id (B, E).
	Step string
	// Attempt is the step attempt (B, E) or the run attempt (X).
	Attempt int
}

// ParseRecord parses one log line.
func ParseRecord(line string) (Record, error) {
	f := strings.Fields(line)
	bad := func(why string) (Record, error) {
		return Record{}, fmt.Errorf("chaos log line %q: %s", line, why)
	}
	if len(f) < 6 || len(f[0]) != 1 {
		return bad("too few fields")
	}
	r := Record{Kind: f[0][0]}
	switch r.Kind {
	case testflows.ChaosExecBegin, testflows.ChaosExecEnd:
		if len(f) != 6 {
			return bad("want 6 fields")
		}
	case testflows.ChaosStepBegin, testflows.ChaosStepEnd:
		if len(f) != 7 {
			return bad("want 7 fields")
		}
		r.Step = f[5]
	default:
		return bad("unknown kind")
	}
	ns, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return bad("bad time")
	}
	r.At = time.Unix(0, ns)
	if r.Run, err = uuid.Parse(f[2]); err != nil {
		return bad("bad run id")
	}
	r.Exec = f[3]
	if r.PID, err = strconv.Atoi(f[4]); err != nil {
		return bad("bad pid")
	}
	if r.Attempt, err = strconv.Atoi(f[len(f)-1]); err != nil {
		return bad("bad attempt")
	}
	return r, nil
}

// ReadRecords parses a chaos log. A torn last line (the process was
// killed in the middle of a write, which O_APPEND writes of this size do
// not do in practice) is skipped and counted.
func ReadRecords(r io.Reader) (recs []Record, torn int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		rec, err := ParseRecord(line)
		if err != nil {
			torn++
			continue
		}
		recs = append(recs, rec)
	}
	return recs, torn, sc.Err()
}

// ReadDir reads every worker's chaos log in dir.
func ReadDir(dir string) (recs []Record, torn int, err error) {
	files, err := filepath.Glob(filepath.Join(dir, testflows.ChaosLogPrefix+"*.log"))
	if err != nil {
		return nil, 0, err
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		rs, t, err := ReadRecords(f)
		_ = f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", name, err)
		}
		recs = append(recs, rs...)
		torn += t
	}
	return recs, torn, nil
}
