package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// installHeading is the README section that says how to install the CLI.
const installHeading = "### Installing the CLI"

// readmeInstall returns the lines of the first sh block under
// installHeading in the README at path, comments cut.
func readmeInstall(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+installHeading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", path, installHeading)
	}
	// The block must come before the next heading.
	at := strings.Index(section, "```sh\n")
	if at < 0 || strings.Contains(section[:at], "\n#") {
		t.Fatalf("%s: no sh block in the %q section", path, installHeading)
	}
	block, _, _ := strings.Cut(section[at+len("```sh\n"):], "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l, _, _ = strings.Cut(l, "#")
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestREADMEInstall: the README's way of installing the CLI works. `go
// install github.com/kagzi/kagzi/cmd/kagzi@version` cannot (cmd/kagzi's
// go.mod replaces the root module by a path), so the README says to run
// its `go` line in a clone; this runs that very line from the
// repository's root, with GOBIN a directory of the test's, and the
// installed kagzi answers --help.
func TestREADMEInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	lines := readmeInstall(t, filepath.Join(root, "README.md"))
	var install []string
	for _, l := range lines {
		if strings.HasPrefix(l, "go ") {
			if install != nil {
				t.Fatalf("README: more than one go command in %q: %q", installHeading, lines)
			}
			install = strings.Fields(l)
		}
	}
	if install == nil || !contains(install, "install") {
		t.Fatalf("README: no go install command in %q: %q", installHeading, lines)
	}
	if !strings.HasPrefix(lines[0], "git clone ") || !strings.Contains(lines[0], "cd kagzi") {
		t.Errorf("README: the block does not begin by cloning and entering the repository: %q", lines[0])
	}
	if last := lines[len(lines)-1]; last != "kagzi --help" {
		t.Errorf("README: the block ends with %q, not the check this test makes (kagzi --help)", last)
	}
	if strings.Contains(strings.Join(install, " "), "@") {
		t.Fatalf("README: %q installs by version, which cmd/kagzi's replace directive forbids", install)
	}

	gobin := t.TempDir()
	cmd := exec.Command(goCommand(), install[1:]...)
	cmd.Dir = root
	// A work file would hide what a clone without one does.
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (in %s): %v\n%s", strings.Join(install, " "), root, err, out)
	}
	bin := filepath.Join(gobin, "kagzi")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("installed kagzi --help: %v\n%s", err, out)
	}
	for _, want := range []string{"dev", "nats-config", "run"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("installed kagzi --help does not list %q:\n%s", want, out)
		}
	}
}

// goCommand is the go command on PATH, as a person would run it, else the
// one of the toolchain running the test.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
