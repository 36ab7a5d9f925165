package testnats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// binEnv names a nats-server binary to run instead of the one built from
// the natsbin module (a machine with a server installed, say).
const binEnv = "KAGZI_TEST_NATS_SERVER"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary is the path of the nats-server binary the tests run: $binEnv, or
// the version natsbin/go.mod pins, built once into the user's cache
// directory and kept there for every later test run.
func binary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv(binEnv); p != "" {
			binPath = p
			return
		}
		binPath, binErr = build()
	})
	return binPath, binErr
}

// build builds the pinned nats-server unless the cache holds it. Test
// binaries of several packages run at once: a lock file lets one of them
// build while the others wait, and the build lands under a temporary name
// renamed into place, so no one runs a half-written file.
func build() (string, error) {
	mod, err := modDir()
	if err != nil {
		return "", err
	}
	version, err := pinnedVersion(filepath.Join(mod, "go.mod"))
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "kagzi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("nats-server-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH)
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	out := filepath.Join(dir, name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	unlock, err := lockFile(out + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil // built while this one waited for the lock
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command(goTool(), "build", "-o", tmp, "github.com/nats-io/nats-server/v2")
	cmd.Dir = mod
	// The natsbin module stands alone, whatever workspace or flags the
	// tests run under.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("build nats-server %s in %s: %v\n%s", version, mod, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return out, nil
}

// modDir is the natsbin module's directory, found from this file's path:
// tests run from their package's source tree.
func modDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("testnats: source path unknown; set %s to a nats-server binary", binEnv)
	}
	dir := filepath.Join(filepath.Dir(file), "natsbin")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("testnats: %v; set %s to a nats-server binary", err, binEnv)
	}
	return dir, nil
}

// pinnedVersion is the nats-server version the go.mod at path requires.
func pinnedVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	const mod = "github.com/nats-io/nats-server/v2 "
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if rest, ok := strings.CutPrefix(line, mod); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], nil
			}
		}
	}
	return "", errors.New(path + ": no nats-server requirement")
}

// goTool is the go command: the one on PATH, else the one of the toolchain
// that built the test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
