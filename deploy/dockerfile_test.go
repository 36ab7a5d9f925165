package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, COPY...
	Args string
	Line int
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, backslash continuations joined.
func parseDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue // a comment (also between continuation lines), or blank
		}
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSuffix(line, `\`))
		cur.WriteString(" ")
		if cont {
			continue
		}
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		out = append(out, instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends in a continuation line", file)
	}
	return out
}

// stage is one FROM ... section of a Dockerfile.
type stage struct {
	Image, Name string
	Ins         []instruction
}

func stages(t *testing.T, ins []instruction) (args []instruction, out []stage) {
	t.Helper()
	for _, in := range ins {
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--") })
			st := stage{Image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			out = append(out, st)
			continue
		}
		if len(out) == 0 {
			args = append(args, in)
			continue
		}
		out[len(out)-1].Ins = append(out[len(out)-1].Ins, in)
	}
	return args, out
}

// goBuild is one go build command of the Dockerfile.
type goBuild struct {
	Dir      string   // the module directory it runs in (go -C), "." for the root
	Flags    []string // every flag and value before the packages
	Output   string   // -o
	Packages []string // as given: ./cmd/dispatcher, or . in cmd/kagzi
	Env      string   // the RUN line, for CGO_ENABLED etc.
}

// binaries are b's packages relative to the repository root, as
// ./cmd/kagzi.
func (b goBuild) binaries() []string {
	var out []string
	for _, p := range b.Packages {
		out = append(out, "./"+path.Join(b.Dir, p))
	}
	return out
}

var goBuildRE = regexp.MustCompile(`\bgo(?:\s+-C\s+(\S+))?\s+build\b(.*?)(?:&&|;|\|\||$)`)

func findGoBuilds(t *testing.T, ins []instruction) []goBuild {
	t.Helper()
	var out []goBuild
	for _, in := range ins {
		if in.Cmd != "RUN" {
			continue
		}
		for _, m := range goBuildRE.FindAllStringSubmatch(in.Args, -1) {
			b := goBuild{Dir: ".", Env: in.Args}
			if m[1] != "" {
				b.Dir = path.Clean(strings.Trim(m[1], `"'`))
			}
			f := strings.Fields(m[2])
			for i := 0; i < len(f); i++ {
				a := strings.Trim(f[i], `"'`)
				switch {
				case a == "-o" && i+1 < len(f):
					b.Output = f[i+1]
					i++
				case strings.HasPrefix(a, "-o="):
					b.Output = strings.TrimPrefix(a, "-o=")
				case a == "-ldflags" && i+1 < len(f):
					// the value is quoted and may hold spaces: take until the closing quote
					v := f[i+1]
					i++
					for strings.Count(v, `"`)%2 == 1 && i+1 < len(f) {
						i++
						v += " " + f[i]
					}
					b.Flags = append(b.Flags, "-ldflags="+strings.Trim(v, `"'`))
				case strings.HasPrefix(a, "-"):
					v := f[i]
					for strings.Count(v, `"`)%2 == 1 && i+1 < len(f) {
						i++
						v += " " + f[i]
					}
					b.Flags = append(b.Flags, strings.ReplaceAll(v, `"`, ""))
				default:
					b.Packages = append(b.Packages, a)
				}
			}
			out = append(out, b)
		}
	}
	return out
}

// modules are the directories, relative to the repository root, of the
// repository's Go modules: the root and every nested go.mod.
func modules(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(out, ".") || !slices.Contains(out, "cmd/kagzi") {
		t.Fatalf("modules %v: want the root and cmd/kagzi at least", out)
	}
	return out
}

// goList runs go list over the module in dir, relative to the repository
// root (-e: a package that does not compile right now is still listed),
// and decodes its JSON stream. It lists in the workspace (go.work), where
// the root module a nested one requires is the root's directory, as in
// the image build.
func goList(t *testing.T, dir string) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=Dir,ImportPath,Name,GoFiles,CgoFiles,EmbedFiles,Module", "./...")
	cmd.Dir = filepath.Join(repoRoot, dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(outb))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list found no package in %s", dir)
	}
	return pkgs
}

type listedPackage struct {
	Dir, ImportPath, Name         string
	GoFiles, CgoFiles, EmbedFiles []string
	Module                        *struct{ Path, Dir string }
}

// relPackage is p, of the module in dir, as the Dockerfile names it
// relative to the repository root: ./cmd/dispatcher, ./cmd/kagzi.
func relPackage(dir string, p listedPackage) string {
	if p.Module == nil {
		return p.ImportPath
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, p.Module.Path), "/")
	return "./" + path.Join(dir, rel)
}

func dockerfileBuilds(t *testing.T) []goBuild {
	t.Helper()
	builds := findGoBuilds(t, parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile")))
	if len(builds) == 0 {
		t.Fatal("Dockerfile: no go build command")
	}
	return builds
}

// dockerfileBinaries are the names of the binaries the image holds.
func dockerfileBinaries(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, b := range dockerfileBuilds(t) {
		for _, p := range b.binaries() {
			out = append(out, path.Base(p))
		}
	}
	return out
}

// TestDockerfileBuildsEveryMain compares the Dockerfile's go builds with
// the main packages of every module: each built once, in the directory of
// its own module (a module's packages build with that module's go.mod).
func TestDockerfileBuildsEveryMain(t *testing.T) {
	mainsIn := map[string]string{} // ./cmd/kagzi -> cmd/kagzi, its module
	var mains []string
	for _, dir := range modules(t) {
		for _, p := range goList(t, dir) {
			if p.Name == "main" {
				rel := relPackage(dir, p)
				mainsIn[rel] = dir
				mains = append(mains, rel)
			}
		}
	}
	slices.Sort(mains)
	var built []string
	for _, b := range dockerfileBuilds(t) {
		for _, p := range b.binaries() {
			built = append(built, p)
			if dir, ok := mainsIn[p]; ok && dir != b.Dir {
				t.Errorf("Dockerfile builds %s in %s, but it belongs to the module in %s (go -C %s build)", p, b.Dir, dir, dir)
			}
		}
	}
	slices.Sort(built)
	for _, m := range mains {
		if !slices.Contains(built, m) {
			t.Errorf("Dockerfile does not build main package %s (it builds %v)", m, built)
		}
	}
	for _, p := range built {
		if !slices.Contains(mains, p) {
			t.Errorf("Dockerfile builds %s, which is not a main package of any module (mains: %v)", p, mains)
		}
	}
	for _, want := range []string{"./cmd/kagzi", "./cmd/healthcheck", "./cmd/dispatcher", "./cmd/scheduler", "./cmd/reaper", "./cmd/worker"} {
		if !slices.Contains(built, want) {
			t.Errorf("Dockerfile does not build %s", want)
		}
	}
	names := map[string]string{}
	for _, p := range built {
		if prev, ok := names[path.Base(p)]; ok {
			t.Errorf("%s and %s would both be /usr/local/bin/%s", prev, p, path.Base(p))
		}
		names[path.Base(p)] = p
	}
}

func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	globalArgs, st := stages(t, ins)
	if len(st) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(st))
	}

	builds := dockerfileBuilds(t)
	// The builder's Go matches the go directive of every module it builds.
	argVersion := ""
	for _, a := range globalArgs {
		if v, ok := strings.CutPrefix(a.Args, "GO_VERSION="); a.Cmd == "ARG" && ok {
			argVersion = strings.Trim(v, `"`)
		}
	}
	for _, b := range builds {
		if v := goModVersion(t, b.Dir); argVersion != v {
			t.Errorf("Dockerfile ARG GO_VERSION=%q, %s says go %s", argVersion, path.Join(b.Dir, "go.mod"), v)
		}
	}
	build := st[0]
	if build.Image != "golang:${GO_VERSION}" && !strings.HasPrefix(build.Image, "golang:${GO_VERSION}-") {
		t.Errorf("build stage FROM %s, want golang:${GO_VERSION}", build.Image)
	}

	// Each built module's go.mod and go.sum are copied and downloaded
	// before the sources, so the module layer survives source edits.
	copyAll := slices.IndexFunc(build.Ins, func(in instruction) bool { return in.Cmd == "COPY" && strings.HasPrefix(in.Args, ". ") })
	for _, b := range builds {
		modFile, sumFile, download := "go.mod", "go.sum", "go mod download"
		if b.Dir != "." {
			modFile, sumFile, download = b.Dir+"/go.mod", b.Dir+"/go.sum", "go -C "+b.Dir+" mod download"
		}
		copyMod := slices.IndexFunc(build.Ins, func(in instruction) bool {
			f := strings.Fields(in.Args)
			return in.Cmd == "COPY" && slices.Contains(f, modFile) && slices.Contains(f, sumFile)
		})
		down := slices.IndexFunc(build.Ins, func(in instruction) bool { return in.Cmd == "RUN" && strings.Contains(in.Args, download) })
		if !(copyMod >= 0 && copyMod < down && down < copyAll) {
			t.Errorf("build stage: want COPY %s %s, RUN %s, then COPY . . (got indexes %d, %d, %d)", modFile, sumFile, download, copyMod, down, copyAll)
		}
	}

	// Static, reproducible, stripped binaries, all in one directory.
	cgoOff := false
	for _, in := range build.Ins {
		if in.Cmd == "ENV" && strings.Contains(in.Args, "CGO_ENABLED=0") {
			cgoOff = true
		}
	}
	for _, b := range builds {
		if !cgoOff && !strings.Contains(b.Env, "CGO_ENABLED=0") {
			t.Errorf("go build in %s: not with CGO_ENABLED=0", b.Dir)
		}
		if !slices.Contains(b.Flags, "-trimpath") {
			t.Errorf("go build flags %q lack -trimpath", b.Flags)
		}
		ld := ""
		for _, f := range b.Flags {
			if v, ok := strings.CutPrefix(f, "-ldflags="); ok {
				ld = v
			}
		}
		if lf := strings.Fields(ld); !slices.Contains(lf, "-s") || !slices.Contains(lf, "-w") {
			t.Errorf("go build -ldflags %q, want -s -w", ld)
		}
		if !strings.HasSuffix(b.Output, "/") || !path.IsAbs(b.Output) {
			t.Errorf("go build -o %q, want an absolute directory (one binary per package, wherever go -C runs)", b.Output)
		}
		if b.Output != builds[0].Output {
			t.Errorf("go build -o %q and %q: want every binary in one directory", builds[0].Output, b.Output)
		}
	}
	b := builds[0]

	// The runtime stage: minimal, non-root, every binary in /usr/local/bin,
	// no ENTRYPOINT (the command picks the binary).
	final := st[len(st)-1]
	if !strings.HasPrefix(final.Image, "gcr.io/distroless/static") && final.Image != "scratch" {
		t.Errorf("runtime stage FROM %s, want distroless static or scratch", final.Image)
	}
	var user, expose string
	copied := false
	for _, in := range final.Ins {
		switch in.Cmd {
		case "USER":
			user = in.Args
		case "EXPOSE":
			expose = in.Args
		case "ENTRYPOINT":
			t.Errorf("line %d: ENTRYPOINT: the image selects its binary by command", in.Line)
		case "COPY":
			f := strings.Fields(in.Args)
			if len(f) == 3 && f[0] == "--from="+build.Name && f[1] == b.Output && f[2] == "/usr/local/bin/" {
				copied = true
			}
		}
	}
	if !copied {
		t.Errorf("runtime stage does not COPY --from=%s %s /usr/local/bin/", build.Name, b.Output)
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("runtime USER %q, want a non-root user", user)
	}
	if uid != "65532" {
		t.Errorf("runtime USER %q, want 65532 (distroless nonroot; the k8s manifests run as 65532)", user)
	}
	if !slices.Contains(strings.Fields(expose), "8080") {
		t.Errorf("EXPOSE %q, want 8080 (health endpoints)", expose)
	}
}

// goModVersion is the go directive of the go.mod in dir, relative to the
// repository root.
func goModVersion(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindSubmatch(src)
	if m == nil {
		t.Fatalf("%s has no go directive", path.Join(dir, "go.mod"))
	}
	return string(m[1])
}

// TestDockerignore: the build context keeps everything the build needs.
// Patterns are matched as Docker does for the simple forms used here
// (path.Match per path and per parent directory, ** for any depth, a
// leading / anchoring at the root, ! re-including).
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		patterns = append(patterns, l)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var needed []string
	for _, b := range dockerfileBuilds(t) {
		needed = append(needed, path.Join(b.Dir, "go.mod"), path.Join(b.Dir, "go.sum"))
		for _, p := range goList(t, b.Dir) {
			rel, err := filepath.Rel(root, p.Dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range slices.Concat(p.GoFiles, p.CgoFiles, p.EmbedFiles) {
				needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	for _, f := range needed {
		if dockerIgnored(patterns, f) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", f)
		}
	}
	for _, f := range []string{".git/HEAD", "kagzi", "bin/dispatcher", ".cache/pg/x", "deploy/compose.yaml"} {
		if !dockerIgnored(patterns, f) {
			t.Errorf(".dockerignore keeps %s in the build context", f)
		}
	}
}

func dockerIgnored(patterns []string, file string) bool {
	ignored := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		if globMatch(p, file) {
			ignored = !neg
		}
	}
	return ignored
}

// globMatch matches file or any of its parent directories against p.
func globMatch(p, file string) bool {
	for f := file; f != "." && f != ""; f = path.Dir(f) {
		if matchDoublestar(strings.Split(p, "/"), strings.Split(f, "/")) {
			return true
		}
	}
	return false
}

func matchDoublestar(p, f []string) bool {
	if len(p) == 0 {
		return len(f) == 0
	}
	if p[0] == "**" {
		for i := 0; i <= len(f); i++ {
			if matchDoublestar(p[1:], f[i:]) {
				return true
			}
		}
		return false
	}
	if len(f) == 0 {
		return false
	}
	ok, err := path.Match(p[0], f[0])
	return err == nil && ok && matchDoublestar(p[1:], f[1:])
}
