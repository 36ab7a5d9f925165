package client_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExamplesCompile holds the README and the pages of docs/ to the
// examples of this package: each Go block marked `<!-- example: NAME -->`
// must be the lines between `// README: NAME` and `// README: end` in
// example_test.go (indentation aside), which compile with the package's
// tests against the public packages only; and each of those examples is
// shown on some page.
func TestReadmeExamplesCompile(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, page := range append([]string{"../../README.md"}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(page, "../../")
		blocks := regexp.MustCompile("(?s)<!-- example: ([a-z]+) -->\\s*```go\\n(.*?)```").FindAllSubmatch(text, -1)
		if name == "README.md" && len(blocks) < 3 {
			t.Fatalf("README has %d marked examples, want the declaration, the worker and the client", len(blocks))
		}
		for _, b := range blocks {
			example := string(b[1])
			shown[example] = true
			re := regexp.MustCompile("(?s)// README: " + example + "\\n(.*?)// README: end")
			m := re.FindSubmatch(src)
			if m == nil {
				t.Errorf("%s: example %q has no counterpart in example_test.go", name, example)
				continue
			}
			if got, want := norm(string(b[2])), norm(string(m[1])); got != want {
				t.Errorf("%s: example %q differs from example_test.go:\n%s:\n%s\nexample:\n%s", name, example, name, got, want)
			}
		}
	}
	for _, m := range regexp.MustCompile("// README: ([a-z]+)\\n").FindAllSubmatch(src, -1) {
		if example := string(m[1]); example != "end" && !shown[example] {
			t.Errorf("example_test.go's %q is on no page (mark its block <!-- example: %s -->)", example, example)
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
