package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// installHeading is the README section that says how to install the CLI.
const installHeading = "### Installing the CLI"

// rootModule and cliModule are the module paths a release publishes.
const (
	rootModule = "github.com/kagzi/kagzi"
	cliModule  = rootModule + "/cmd/kagzi"
)

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

// TestREADMEInstall: the README's way of installing the CLI, `go install
// github.com/kagzi/kagzi/cmd/kagzi@<version>`, works as it would from the
// module proxy once a release is tagged. The test publishes this tree as
// that release in a module proxy directory of its own (the root module
// and the CLI's, at the version cmd/kagzi/go.mod requires of the root,
// as the GOPROXY protocol serves them), runs the README's go line outside
// any module and workspace (GOWORK=off) with GOPROXY that directory, then
// the module cache's download directory for every other dependency (no
// network), and a module cache of its own, and the installed kagzi
// answers --help. A replace directive in cmd/kagzi/go.mod, which `go
// install` with a version refuses, fails it.
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
	if len(install) != 3 || install[1] != "install" || !strings.HasPrefix(install[2], cliModule+"@") {
		t.Fatalf("README: the go line of %q is %q, want go install %s@<version>", installHeading, install, cliModule)
	}
	if last := lines[len(lines)-1]; last != "kagzi --help" {
		t.Errorf("README: the block ends with %q, not the check this test makes (kagzi --help)", last)
	}

	version := requiredRootVersion(t, filepath.Join(root, "cmd", "kagzi", "go.mod"))
	modcache := goEnv(t, "GOMODCACHE")
	proxy := t.TempDir()
	publish(t, proxy, rootModule, version, root)
	publish(t, proxy, cliModule, version, filepath.Join(root, "cmd", "kagzi"))

	gobin, cache, home := t.TempDir(), t.TempDir(), t.TempDir()
	env := append(os.Environ(),
		"GOBIN="+gobin,
		"GOWORK=off",
		"GOMODCACHE="+cache,
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download")),
		"GOSUMDB=off",
		"GONOSUMDB="+rootModule,
		"GOFLAGS=-mod=mod -trimpath", // -trimpath: the build cache serves a run after the first, whatever the module cache
		"GOTOOLCHAIN=local",
	)
	// Module cache files are read-only: the temporary directory could not
	// be removed without this.
	t.Cleanup(func() {
		c := exec.Command(goCommand(), "clean", "-modcache")
		c.Env, c.Dir = env, home
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache: %v\n%s", err, out)
		}
	})
	if v := strings.TrimPrefix(install[2], cliModule+"@"); v != "latest" && v != version {
		t.Fatalf("README installs %s, want @latest or @%s, the version cmd/kagzi/go.mod requires of the root", install[2], version)
	}
	cmd := exec.Command(goCommand(), install[1:]...)
	cmd.Dir = home // outside the repository: no go.mod, no go.work
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (GOPROXY %s): %v\n%s", strings.Join(install, " "), proxy, err, out)
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
	// The binary was built from the published modules at the version.
	bi, err := exec.Command(goCommand(), "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, bi)
	}
	for _, want := range []string{"mod\t" + cliModule + "\t" + version, "dep\t" + rootModule + "\t" + version} {
		if !strings.Contains(string(bi), want) {
			t.Errorf("go version -m %s lacks %q:\n%s", bin, want, bi)
		}
	}
}

// TestWorkspaceReplacesRequiredRoot: go.work, in which the modules are
// developed together, replaces the very version of the root module that
// every nested module requires by the root's directory, so that a
// workspace build never asks a proxy for a version not yet published.
func TestWorkspaceReplacesRequiredRoot(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goCommand(), "work", "edit", "-json", filepath.Join(root, "go.work")).Output()
	if err != nil {
		t.Fatalf("go work edit -json: %v", err)
	}
	var work struct {
		Use     []struct{ DiskPath string }
		Replace []struct {
			Old struct{ Path, Version string }
			New struct{ Path string }
		}
	}
	if err := json.Unmarshal(out, &work); err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{}
	for _, r := range work.Replace {
		if r.Old.Path == rootModule && filepath.Clean(r.New.Path) == "." {
			replaced[r.Old.Version] = true
		}
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, filepath.ToSlash(filepath.Clean(u.DiskPath)))
	}
	mods := moduleDirs(t, root)
	for _, dir := range mods {
		if !slices.Contains(used, dir) {
			t.Errorf("go.work does not use %s", dir)
		}
		if dir == "." {
			continue
		}
		gomod := filepath.Join(root, dir, "go.mod")
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nreplace ") {
			t.Errorf("%s has a replace directive: `go install` with a version refuses it; go.work joins the modules", gomod)
		}
		if v := requiredRootVersion(t, gomod); v != "" && !replaced[v] {
			t.Errorf("%s requires %s %s, which go.work does not replace by the root (replaces %v)", gomod, rootModule, v, work.Replace)
		}
	}
}

// moduleDirs are the module directories scripts/modules.sh lists.
func moduleDirs(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, "scripts", "modules.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/modules.sh: %v", err)
	}
	return strings.Fields(string(out))
}

// requiredRootVersion is the version of the root module the go.mod at
// path requires, "" if none.
func requiredRootVersion(t *testing.T, gomod string) string {
	t.Helper()
	out, err := exec.Command(goCommand(), "mod", "edit", "-json", gomod).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", gomod, err)
	}
	var m struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Require {
		if r.Path == rootModule {
			return r.Version
		}
	}
	return ""
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command(goCommand(), "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		t.Fatalf("go env %s is empty", name)
	}
	return v
}

// publish writes module mod at version, from the files of dir that git
// would publish (tracked or untracked, not ignored), into the module
// proxy directory proxy: list, .info, .mod and .zip, as the GOPROXY
// protocol lays them out. The zip follows the module zip rules: every
// name under mod@version/, regular files only, no nested module (a
// directory holding a go.mod) and no vendor directory.
func publish(t *testing.T, proxy, mod, version, dir string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z")
	ls.Dir = dir
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", dir, err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	nested := map[string]bool{}
	for _, f := range files {
		if path.Base(f) == "go.mod" && path.Dir(f) != "." {
			nested[path.Dir(f)] = true
		}
	}
	inNested := func(f string) bool {
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			if nested[d] || path.Base(d) == "vendor" {
				return true
			}
		}
		return false
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	n := 0
	for _, f := range files {
		if f == "" || inNested(f) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f)))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		} else if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(mod + "@" + version + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no file to publish in %s", dir)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(escapePath(mod)), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	for name, b := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(info),
		version + ".mod":  gomod,
		version + ".zip":  buf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// escapePath is a module path as the module proxy protocol spells it:
// each upper-case letter as '!' and its lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// goCommand is the go command on PATH, as a person would run it, else the
// one of the toolchain running the test.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
