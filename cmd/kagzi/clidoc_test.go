package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

var update = flag.Bool("update", false, "rewrite the generated part of docs/cli.md")

// cliPage is the page whose generated part cliReference writes.
const cliPage = "../../docs/cli.md"

// The generated part of cliPage lies between these lines.
const (
	cliBegin = "<!-- Generated from the command tree of cmd/kagzi: go -C cmd/kagzi test -run TestCLIReference -update -->"
	cliEnd   = "<!-- End of the generated reference. -->"
)

// cliReference renders every visible command of the tree: its path, what
// it does, its use line, its long help and examples, and its own flags
// with their defaults (the global flags once, at the root).
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s.\n", c.CommandPath(), strings.TrimSuffix(c.Short, "."))
		fmt.Fprintf(&b, "\n```text\n%s\n```\n", usageLine(c))
		if c.Long != "" {
			fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimRight(c.Long, "\n"))
		}
		if c.Example != "" {
			fmt.Fprintf(&b, "\nExamples:\n\n```text\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
		}
		flags := c.LocalNonPersistentFlags()
		title := "Flags"
		if !c.HasParent() {
			flags, title = c.PersistentFlags(), "Global flags (every command takes them)"
		} else if c.HasPersistentFlags() {
			flags = c.LocalFlags()
		}
		var rows []string
		flags.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			def := "—"
			if f.DefValue != "" && f.DefValue != "[]" {
				def = "`" + f.DefValue + "`"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", name, f.Value.Type(), def, cell(f.Usage)))
		})
		if len(rows) > 0 {
			fmt.Fprintf(&b, "\n%s:\n\n| flag | type | default | meaning |\n| --- | --- | --- | --- |\n%s\n", title, strings.Join(rows, "\n"))
		}
		if subs := visible(c); len(subs) > 0 {
			var names []string
			for _, s := range subs {
				names = append(names, "`"+s.Name()+"`")
			}
			fmt.Fprintf(&b, "\nCommands: %s.\n", strings.Join(names, ", "))
		}
		for _, s := range visible(c) {
			walk(s)
		}
	}
	walk(root)
	return cliBegin + "\n" + b.String() + "\n" + cliEnd
}

// usageLine is the command's use line; a group's names its subcommands.
func usageLine(c *cobra.Command) string {
	if c.HasAvailableSubCommands() {
		return c.CommandPath() + " [command]"
	}
	return c.UseLine()
}

// visible are c's subcommands that help lists, sorted by name as help
// sorts them.
func visible(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() { // sorted by name
		if s.IsAvailableCommand() {
			out = append(out, s)
		}
	}
	return out
}

// cell makes text fit one table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// TestCLIReference: docs/cli.md's reference is what the command tree
// says. With -update it rewrites it. Every KAGZI_* variable is cleared
// first: some flags take their defaults from the environment, and the
// page shows the built-in ones.
func TestCLIReference(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "KAGZI_") {
			t.Setenv(name, "")
		}
	}
	page, err := os.ReadFile(cliPage)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(page, []byte(cliBegin))
	end := bytes.Index(page, []byte(cliEnd))
	if at < 0 || end < at {
		t.Fatalf("%s lacks the lines that enclose the generated reference:\n%s\n%s", cliPage, cliBegin, cliEnd)
	}
	want := cliReference(newRoot(&cliutil.App{}))
	if strings.Count(want, "\n## ") < 20 {
		t.Fatalf("the reference has only %d commands; is the tree built?", strings.Count(want, "\n## "))
	}
	got := string(page[at : end+len(cliEnd)])
	if got == want {
		return
	}
	if *update {
		out := append(append(append([]byte(nil), page[:at]...), want...), page[end+len(cliEnd):]...)
		if err := os.WriteFile(cliPage, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
		i++
	}
	var g, w string
	if i < len(gl) {
		g = gl[i]
	}
	if i < len(wl) {
		w = wl[i]
	}
	t.Errorf("docs/cli.md is not what the command tree says; run\n\tgo -C cmd/kagzi test -run TestCLIReference -update\n(or make docs) and commit it. First difference, at line %d of the generated part:\n got: %s\nwant: %s", i+1, g, w)
}
