package core

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// Every statement the store runs is written whole, once, in a named block
// of a file under sql/ (one file per table or concern), as River keeps
// its queries:
//
//	-- name: RunsClaim :many
//	SELECT ... FROM kagzi.workflow_runs WHERE ...;
//
// A block runs from its "-- name:" line to the next one. The kind after
// the name (:one, :many, :exec, :batch) says how the statement is used;
// the Go code takes a statement by its name with stmt, once, when the
// package initialises, so a name without a block fails every build's
// tests at once. TestSQLFilesUsed fails for a block no code takes.

// statementKinds are the kinds a block may declare.
var statementKinds = map[string]bool{"one": true, "many": true, "exec": true, "batch": true}

var blockName = regexp.MustCompile(`^--\s*name:\s*([A-Z][A-Za-z0-9]*)\s*:(\w+)\s*$`)

// SQLBlock is one named statement as its file writes it.
type SQLBlock struct {
	Name, Kind, File, Text string
}

// parseSQLFile splits one file into its named blocks.
func parseSQLFile(file, src string) ([]SQLBlock, error) {
	var out []SQLBlock
	var cur *SQLBlock
	var body strings.Builder
	flush := func() error {
		if cur == nil {
			return nil
		}
		text := strings.TrimSpace(body.String())
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
		if text == "" {
			return fmt.Errorf("%s: statement %s is empty", file, cur.Name)
		}
		cur.Text = text
		out = append(out, *cur)
		body.Reset()
		return nil
	}
	for i, line := range strings.Split(src, "\n") {
		if m := blockName.FindStringSubmatch(line); m != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			if !statementKinds[m[2]] {
				return nil, fmt.Errorf("%s:%d: statement %s has kind :%s, not one of :one, :many, :exec, :batch", file, i+1, m[1], m[2])
			}
			cur = &SQLBlock{Name: m[1], Kind: m[2], File: file}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "-- name:") {
			return nil, fmt.Errorf("%s:%d: malformed name line %q", file, i+1, line)
		}
		if cur == nil {
			// A file's header: comments and blank lines before its first block.
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
				return nil, fmt.Errorf("%s:%d: text before the first named statement", file, i+1)
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadSQL reads every block of every file of fsys's sql/ directory.
func LoadSQL(fsys fs.FS) (SQLBlocks, error) {
	paths, err := fs.Glob(fsys, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	out := SQLBlocks{}
	for _, p := range paths {
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		blocks, err := parseSQLFile(p, string(src))
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if prev, ok := out[b.Name]; ok {
				return nil, fmt.Errorf("statement %s is written twice: in %s and %s", b.Name, prev.File, b.File)
			}
			out[b.Name] = b
		}
	}
	return out, nil
}

// SQLBlocks are the named statements of one package's sql/*.sql.
type SQLBlocks map[string]SQLBlock

// MustLoadSQL loads the blocks of fsys (a package's embedded sql/*.sql)
// and panics if they are malformed: a package calls it when it
// initialises.
func MustLoadSQL(fsys fs.FS) SQLBlocks {
	m, err := LoadSQL(fsys)
	if err != nil {
		panic("store: " + err.Error())
	}
	return m
}

// Stmt returns the statement named name, rewritten once into Postgres's
// positional form (see named.go). It is called from package variables
// only (through each package's stmt), so a missing name panics when the
// package initialises.
func (b SQLBlocks) Stmt(name string) *NamedSQL {
	blk, ok := b[name]
	if !ok {
		panic(fmt.Sprintf("store: no statement %s in sql/*.sql", name))
	}
	return PrepareNamed(blk.Text)
}
