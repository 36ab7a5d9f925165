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

// goBuild is the go build command of the Dockerfile.
type goBuild struct {
	Flags    []string // every flag and value before the packages
	Output   string   // -o
	Packages []string // ./cmd/kagzi ...
	Env      string   // the RUN line, for CGO_ENABLED etc.
}

var goBuildRE = regexp.MustCompile(`\bgo build\b(.*?)(?:&&|;|\|\||$)`)

func findGoBuilds(t *testing.T, ins []instruction) []goBuild {
	t.Helper()
	var out []goBuild
	for _, in := range ins {
		if in.Cmd != "RUN" {
			continue
		}
		for _, m := range goBuildRE.FindAllStringSubmatch(in.Args, -1) {
			b := goBuild{Env: in.Args}
			f := strings.Fields(m[1])
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

// goList runs go list over the module (-e: a package that does not compile
// right now is still listed) and decodes its JSON stream.
func goList(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=Dir,ImportPath,Name,GoFiles,CgoFiles,EmbedFiles,Module", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
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
		t.Fatal("go list found no package")
	}
	return pkgs
}

type listedPackage struct {
	Dir, ImportPath, Name         string
	GoFiles, CgoFiles, EmbedFiles []string
	Module                        *struct{ Path, Dir string }
}

// relPackage is p as the Dockerfile names it: ./services/dispatcher.
func relPackage(p listedPackage) string {
	if p.Module == nil {
		return p.ImportPath
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, p.Module.Path), "/")
	return "./" + rel
}

func dockerfileBuild(t *testing.T) goBuild {
	t.Helper()
	builds := findGoBuilds(t, parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile")))
	if len(builds) != 1 {
		t.Fatalf("Dockerfile: %d go build commands, want one building every binary", len(builds))
	}
	return builds[0]
}

// dockerfileBinaries are the names of the binaries the image holds.
func dockerfileBinaries(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range dockerfileBuild(t).Packages {
		out = append(out, path.Base(p))
	}
	return out
}

// TestDockerfileBuildsEveryMain compares the Dockerfile's go build with
// the module's main packages.
func TestDockerfileBuildsEveryMain(t *testing.T) {
	b := dockerfileBuild(t)
	var mains []string
	for _, p := range goList(t) {
		if p.Name == "main" {
			mains = append(mains, relPackage(p))
		}
	}
	slices.Sort(mains)
	built := slices.Clone(b.Packages)
	slices.Sort(built)
	for _, m := range mains {
		if !slices.Contains(built, m) {
			t.Errorf("Dockerfile does not build main package %s (it builds %v)", m, built)
		}
	}
	for _, p := range built {
		if !slices.Contains(mains, p) {
			t.Errorf("Dockerfile builds %s, which is not a main package of the module (mains: %v)", p, mains)
		}
	}
	for _, want := range []string{"./cmd/kagzi", "./cmd/healthcheck", "./services/dispatcher", "./services/scheduler", "./services/reaper", "./services/worker"} {
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

	// The builder's Go matches go.mod's go directive.
	goVersion := goModVersion(t)
	argVersion := ""
	for _, a := range globalArgs {
		if v, ok := strings.CutPrefix(a.Args, "GO_VERSION="); a.Cmd == "ARG" && ok {
			argVersion = strings.Trim(v, `"`)
		}
	}
	if argVersion != goVersion {
		t.Errorf("Dockerfile ARG GO_VERSION=%q, go.mod says go %s", argVersion, goVersion)
	}
	build := st[0]
	if build.Image != "golang:${GO_VERSION}" && !strings.HasPrefix(build.Image, "golang:${GO_VERSION}-") {
		t.Errorf("build stage FROM %s, want golang:${GO_VERSION}", build.Image)
	}

	// go.mod and go.sum are copied and downloaded before the sources, so
	// the module layer survives source edits.
	copyMod, download, copyAll := -1, -1, -1
	for i, in := range build.Ins {
		switch {
		case in.Cmd == "COPY" && strings.Contains(in.Args, "go.mod") && strings.Contains(in.Args, "go.sum"):
			copyMod = i
		case in.Cmd == "RUN" && strings.Contains(in.Args, "go mod download"):
			download = i
		case in.Cmd == "COPY" && strings.HasPrefix(in.Args, ". "):
			copyAll = i
		}
	}
	if !(copyMod >= 0 && copyMod < download && download < copyAll) {
		t.Errorf("build stage: want COPY go.mod go.sum, RUN go mod download, then COPY . . (got indexes %d, %d, %d)", copyMod, download, copyAll)
	}

	// Static, reproducible, stripped binaries.
	b := dockerfileBuild(t)
	cgoOff := strings.Contains(b.Env, "CGO_ENABLED=0")
	for _, in := range build.Ins {
		if in.Cmd == "ENV" && strings.Contains(in.Args, "CGO_ENABLED=0") {
			cgoOff = true
		}
	}
	if !cgoOff {
		t.Error("Dockerfile does not build with CGO_ENABLED=0")
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
	if !strings.HasSuffix(b.Output, "/") {
		t.Errorf("go build -o %q, want a directory (one binary per package)", b.Output)
	}

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

func goModVersion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("go.mod has no go directive")
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
	needed := []string{"go.mod", "go.sum"}
	for _, p := range goList(t) {
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range slices.Concat(p.GoFiles, p.CgoFiles, p.EmbedFiles) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
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
