package client_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExamplesCompile holds the README to the examples of this
// package: each Go block of the README marked `<!-- example: NAME -->` must
// be the lines between `// README: NAME` and `// README: end` in
// example_test.go (indentation aside), which compile with the package's
// tests against the public packages only.
func TestReadmeExamplesCompile(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- example: ([a-z]+) -->\\s*```go\\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) < 3 {
		t.Fatalf("README has %d marked examples, want the declaration, the worker and the client", len(blocks))
	}
	for _, b := range blocks {
		name := string(b[1])
		re := regexp.MustCompile("(?s)// README: " + name + "\\n(.*?)// README: end")
		m := re.FindSubmatch(src)
		if m == nil {
			t.Errorf("README example %q has no counterpart in example_test.go", name)
			continue
		}
		if got, want := norm(string(b[2])), norm(string(m[1])); got != want {
			t.Errorf("README example %q differs from example_test.go:\nREADME:\n%s\nexample:\n%s", name, got, want)
		}
	}
}

func norm(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
