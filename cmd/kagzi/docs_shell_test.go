package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docsCLIEnv makes the test binary the CLI: TestDocShellExamples puts a
// `kagzi` on PATH that runs this binary with it set, so every example runs
// the CLI of this tree, in-process code and all, without building it.
const docsCLIEnv = "KAGZI_DOCS_EXAMPLE_CLI"

func init() {
	if os.Getenv(docsCLIEnv) != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shellBlock is a fenced shell block of a page.
type shellBlock struct {
	page   string
	line   int    // of the opening fence, from 1
	norun  string // the reason it is not run; "" runs it
	marked bool   // a norun marker precedes it
	body   []string
}

var (
	fenceRE = regexp.MustCompile("^\\s*```(\\S*)")
	norunRE = regexp.MustCompile(`^<!-- norun:(.*)-->\s*$`)
	exitsRE = regexp.MustCompile(`#\s*exits (\d+)`)
)

// shellLangs are the fence info strings of shell examples.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// shellBlocks returns the shell blocks of page (text). A norun marker is
// the line right before the fence; a marker before anything else is a
// problem, returned.
func shellBlocks(page, text string) (out []shellBlock, problems []string) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if m := norunRE.FindStringSubmatch(lines[i]); m != nil {
			if i+1 >= len(lines) || !shellLangs[fenceLang(lines[i+1])] {
				problems = append(problems, fmt.Sprintf("%s:%d: a norun marker must be the line right before a shell block's fence", page, i+1))
			}
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i
		i++
		for i < len(lines) && strings.TrimSpace(lines[i]) != "```" {
			i++
		}
		if !shellLangs[m[1]] {
			continue
		}
		b := shellBlock{page: page, line: start + 1, body: lines[start+1 : i]}
		if start > 0 {
			if n := norunRE.FindStringSubmatch(lines[start-1]); n != nil {
				b.marked, b.norun = true, strings.TrimSpace(n[1])
			}
		}
		out = append(out, b)
	}
	return out, problems
}

func fenceLang(line string) string {
	if m := fenceRE.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// script turns a block into a bash script that runs its commands in
// order and stops at the first whose exit code is not the one expected:
// 0, or N for a command whose comment says `# exits N`. Lines ending in a
// backslash continue the command.
func (b shellBlock) script() string {
	var s strings.Builder
	s.WriteString("set -o pipefail\n")
	for i := 0; i < len(b.body); i++ {
		at := i
		cmd := b.body[i]
		for strings.HasSuffix(strings.TrimRight(cmd, " "), "\\") && i+1 < len(b.body) {
			i++
			cmd += "\n" + b.body[i]
		}
		if t := strings.TrimSpace(cmd); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		want := 0
		if m := exitsRE.FindStringSubmatch(cmd); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		fmt.Fprintf(&s, "%s\n__rc=$?; if [ \"$__rc\" -ne %d ]; then echo \"%s:%d: exit $__rc, want %d\" >&2; exit 97; fi\n",
			cmd, want, b.page, b.line+1+at, want)
	}
	return s.String()
}

// TestDocShellExamples runs every shell block of the README and of docs/
// against a real `kagzi dev` (a database, a NATS server and every service
// with the example workflows, as `make run` has): each block in a bash of
// its own, in a directory of its own, `kagzi` on PATH being this tree's
// CLI, KAGZI_DATABASE_URL and KAGZI_NATS_URL reaching the dev server and
// KAGZI_CONSOLE its web console (whose /v1/ the HTTP API examples call).
// Every command must exit 0, or the code its comment gives (`# exits 1`).
// A block that cannot run here (Docker, Kubernetes, a benchmark of
// minutes, a service that runs until stopped, an install) is marked by the
// line `<!-- norun: reason -->` right before its fence; the reason may not
// be empty. Generated pages use `text` fences for the help they quote.
func TestDocShellExamples(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("jq is not installed; the examples pipe JSON through it")
		}
		t.Skip("jq is not installed; the examples pipe JSON through it")
	}
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []shellBlock
	for _, p := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		bs, problems := shellBlocks(rel, string(text))
		for _, p := range problems {
			t.Error(p)
		}
		blocks = append(blocks, bs...)
	}
	var run, norun int
	for _, b := range blocks {
		switch {
		case b.marked && b.norun == "":
			t.Errorf("%s:%d: a norun marker without a reason", b.page, b.line)
		case b.marked:
			norun++
		default:
			run++
		}
	}
	t.Logf("%d shell blocks: %d run, %d marked norun", len(blocks), run, norun)
	if run < 8 {
		t.Fatalf("only %d shell blocks to run; is the extraction broken?", run)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	shim := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", docsCLIEnv, self)
	if err := os.WriteFile(filepath.Join(bin, "kagzi"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDev(t)
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KAGZI_DATABASE_URL="+d.url, "KAGZI_NATS_URL="+d.natsURL, "KAGZI_CONSOLE="+d.console)
	for _, b := range blocks {
		if b.marked {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", b.script())
		// At the block's deadline the whole process group goes, and the
		// output is not waited for past WaitDelay: a command the block
		// started (a CLI waiting for a run) must not hold the test.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		cmd.Dir = t.TempDir()
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s:%d: the block failed (%v):\n%s\noutput:\n%s", b.page, b.line, err, strings.Join(b.body, "\n"), out)
		}
	}
	d.stop()
}

// The extraction itself: a marker belongs to the block right after it, a
// marker without a reason or without a block is reported, continuation
// lines make one command, and `# exits N` sets the code it must exit with.
func TestShellBlocksExtraction(t *testing.T) {
	page := "intro\n" +
		"<!-- norun: needs Docker -->\n```sh\ndocker compose up\n```\n" +
		"```go\nfmt.Println()\n```\n" +
		"```sh\nkagzi run start X \\\n  --wait\nkagzi attribute delete a  # exits 1: refused\n# a comment\n```\n" +
		"```text\nkagzi --help\n```\n"
	blocks, problems := shellBlocks("page.md", page)
	if len(problems) > 0 {
		t.Errorf("problems: %q", problems)
	}
	if len(blocks) != 2 {
		t.Fatalf("%d shell blocks, want 2: %+v", len(blocks), blocks)
	}
	if !blocks[0].marked || blocks[0].norun != "needs Docker" || blocks[0].line != 3 {
		t.Errorf("first block: %+v, want marked norun at line 3", blocks[0])
	}
	if blocks[1].marked {
		t.Errorf("second block is marked: %+v", blocks[1])
	}
	s := blocks[1].script()
	for _, want := range []string{
		"kagzi run start X \\\n  --wait\n__rc=$?; if [ \"$__rc\" -ne 0 ]",
		"page.md:10: exit $__rc, want 0",
		"kagzi attribute delete a  # exits 1: refused\n__rc=$?; if [ \"$__rc\" -ne 1 ]",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "# a comment\n__rc") {
		t.Errorf("a comment line is checked as a command:\n%s", s)
	}

	// A marker without a reason is kept empty (TestDocShellExamples fails
	// on it); a marker before no shell block is a problem.
	if blocks, _ := shellBlocks("bad.md", "<!-- norun: -->\n```sh\nx\n```\n"); len(blocks) != 1 || !blocks[0].marked || blocks[0].norun != "" {
		t.Errorf("a marker without a reason: %+v", blocks)
	}
	if _, problems := shellBlocks("bad.md", "<!-- norun: why -->\ntext\n"); len(problems) != 1 {
		t.Errorf("a marker before no block: problems %q, want one", problems)
	}
}
