package arch

import (
	"go/ast"
	"testing"
)

// The libraries and services have no init function: a package that set
// itself up when linked (registering an implementation into another, say)
// would make what a program does depend on what it happens to import.
// What a package needs it is given, or imports and calls.
func TestNoInitInLibraries(t *testing.T) {
	for _, f := range files(t) {
		if f.test || f.mod != "." || !under(f.rel, "pkg", "internal", "services") {
			continue
		}
		for _, d := range f.ast.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s:%d: func init in a library", f.rel, f.fset.Position(fn.Pos()).Line)
			}
		}
	}
}
