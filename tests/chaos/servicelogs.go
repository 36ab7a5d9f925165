package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var sqlstate = regexp.MustCompile(`\(SQLSTATE [0-9A-Z]{5}\)`)

// errorDigest counts the ERROR lines of the services' logs in dir by
// service, message and cause (the SQLSTATE and its text when there is
// one), most frequent first. It is not an invariant: the services log an
// error for every statement that fails while Postgres restarts, and retry.
// It shows what the faults cost (and what else went wrong, such as
// deadlocks).
func errorDigest(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	counts := map[string]int{}
	for _, name := range files {
		base := filepath.Base(name)
		role, _, ok := strings.Cut(base, "-")
		if !ok || strings.HasPrefix(base, "steps-") {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), `"level":"ERROR"`) {
				continue
			}
			var e struct {
				Msg string `json:"msg"`
				Err string `json:"err"`
			}
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			counts[fmt.Sprintf("%s %q: %s", role, e.Msg, cause(e.Err))]++
		}
		_ = f.Close()
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%5d× %s", counts[k], k)
	}
	return out
}

// cause shortens an error to what tells errors apart: the Postgres error
// with its SQLSTATE, or the error's last part.
func cause(err string) string {
	if loc := sqlstate.FindStringIndex(err); loc != nil {
		head := err[:loc[0]]
		if i := strings.LastIndex(head, ": "); i >= 0 {
			head = head[i+2:]
		}
		return strings.TrimSpace(head) + " " + err[loc[0]:loc[1]]
	}
	if i := strings.LastIndex(err, ": "); i >= 0 {
		err = err[i+2:]
	}
	if len(err) > 80 {
		err = err[:80] + "…"
	}
	return err
}
