package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// directive is a migration's line naming a function of functions/, with
// the file's digest when the migration is the last to name it (see
// migrations/embed.go).
var directive = regexp.MustCompile(`^--\s*kagzi:function\s+([a-z_][a-z0-9_]*)(?:\s+sha256:([0-9a-f]{16}))?\s*$`)

// directiveLike starts every directive; a line that starts so and does
// not parse is refused rather than run as a comment.
var directiveLike = regexp.MustCompile(`^--\s*kagzi:`)

// named is one function directive of a migration file.
type named struct {
	// migration is the file's name, function the function's (its file is
	// functions/<function>.sql), pin the digest it names, if any.
	migration, function, pin string
}

// functions reads and checks the function files of fsys's functions/.
type functions struct {
	fsys fs.FS
}

// digest is the pin of a function file's text: the first 16 hex digits
// of its SHA-256.
func digest(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:8])
}

// expand replaces each directive of up, the up part of migration file,
// with its function's file.
func (f functions) expand(file, up string) (string, error) {
	var b strings.Builder
	for i, line := range strings.SplitAfter(up, "\n") {
		t := strings.TrimSpace(line)
		if !directiveLike.MatchString(t) {
			b.WriteString(line)
			continue
		}
		m := directive.FindStringSubmatch(t)
		if m == nil {
			return "", fmt.Errorf("%s:%d: malformed directive %q (want %q)", file, i+1, t, "-- kagzi:function NAME [sha256:DIGEST]")
		}
		text, err := fs.ReadFile(f.fsys, "functions/"+m[1]+".sql")
		if err != nil {
			return "", fmt.Errorf("%s:%d: function %s: %w", file, i+1, m[1], err)
		}
		if m[2] != "" && digest(text) != m[2] {
			return "", fmt.Errorf("%s:%d: functions/%s.sql has digest %s, not the %s this migration pinned: "+
				"a database past this migration would never get the change; add a migration naming the function "+
				"with sha256:%s and drop the pin here", file, i+1, m[1], digest(text), m[2], digest(text))
		}
		b.WriteString(strings.TrimSpace(string(text)))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// directives returns the function directives of the up parts of the
// migration files of fsys, in version order.
func directives(fsys fs.FS) ([]named, error) {
	names, err := fs.Glob(fsys, "[0-9]*.sql")
	if err != nil {
		return nil, err
	}
	var out []named
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		up, _, _ := strings.Cut(string(body), split)
		for line := range strings.Lines(up) {
			if m := directive.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				out = append(out, named{migration: name, function: m[1], pin: m[2]})
			}
		}
	}
	return out, nil
}
