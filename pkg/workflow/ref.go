package workflow

// Ref names a workflow type together with its input and output types:
// declare it once, next to the workflow, and use it to register the
// implementation (worker.Implement), to start runs (client.StartWorkflow,
// which returns a handle whose Result is an Out) and to start children
// (Ref.StartChild, Ref.Child), so a typo in a name or a mismatched input
// type is a compile error rather than a run nobody serves.
//
//	var ProcessOrder = workflow.New[Order, Receipt]("ProcessOrder")
//
// A type name string still works everywhere (worker.Register,
// client.Client.Start, StartChild) for dynamic or cross-language use; a
// Ref and a string of the same name are the same workflow type.
type Ref[In, Out any] struct {
	name string
}

// New declares the workflow type name with input In and output Out. The
// name must be a valid type name (see worker.Register); it is checked where
// the Ref is used.
func New[In, Out any](name string) Ref[In, Out] {
	return Ref[In, Out]{name: name}
}

// Name is the workflow type's name.
func (r Ref[In, Out]) Name() string { return r.name }

// StartChild starts a child run of the workflow r refers to, as the step id
// of the calling run; see the package function StartChild.
func (r Ref[In, Out]) StartChild(ctx Context, id string, in In, opts ...ChildOption) *ChildFuture[Out] {
	return StartChild[Out](ctx, id, r.name, in, opts...)
}

// Child starts a child run of the workflow r refers to and waits for its
// result; see the package function Child.
func (r Ref[In, Out]) Child(ctx Context, id string, in In, opts ...ChildOption) (Out, error) {
	return Child[Out](ctx, id, r.name, in, opts...)
}

// ContinueAsNew is ContinueAsNew with an input of the workflow's own input
// type.
func (r Ref[In, Out]) ContinueAsNew(ctx Context, in In) error {
	return ContinueAsNew(ctx, in)
}
