package client

import (
	"context"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// Search attributes: typed values a run is started with
// (StartOptions.Attributes), by which List and Count find runs.

// AttributeKind is the kind of a search attribute.
type AttributeKind = store.AttributeKind

// The kinds of a search attribute. A keyword is matched whole and may
// hold a list of values (a query matches a run when one of them does); a
// text is a longer string (up to 2 KiB) compared the same way.
const (
	AttributeKeyword = store.AttributeKeyword
	AttributeText    = store.AttributeText
	AttributeInt     = store.AttributeInt
	AttributeFloat   = store.AttributeFloat
	AttributeBool    = store.AttributeBool
	AttributeTime    = store.AttributeTime
)

// Attribute is a declared search attribute.
type Attribute = store.Attribute

// ErrAttribute: a search attribute of a start or a declaration is
// undeclared, malformed or of the wrong kind; the message names it. It
// wraps ErrInvalidArgument.
var ErrAttribute = store.ErrAttribute

// ErrQueryTimeout: a List or Count by a query ran longer than
// store.QueryTimeout and was stopped; narrow the query.
var ErrQueryTimeout = store.ErrQueryTimeout

// DeclareAttribute declares a search attribute of the client's namespace.
// Declaring it again with the same kind does nothing; with another kind
// it is ErrConflict. A name is a letter then letters, digits or '_' (at
// most 64), not a built-in field; a namespace declares at most 100.
func (c *Client) DeclareAttribute(ctx context.Context, name string, kind AttributeKind) error {
	return c.st.AttributesDeclare(ctx, c.ns, name, kind)
}

// ListAttributes lists the namespace's declared attributes by name.
func (c *Client) ListAttributes(ctx context.Context) ([]Attribute, error) {
	return c.st.AttributesList(ctx, c.ns)
}

// DeleteAttribute removes a declaration; while a run holds a value of it
// (until retention deletes such runs) it is ErrConflict.
func (c *Client) DeleteAttribute(ctx context.Context, name string) error {
	return c.st.AttributesDelete(ctx, c.ns, name)
}

// RunAttributes returns a run's search attributes by name: string,
// []string (a keyword with several values), int64, float64, bool or
// time.Time.
func (c *Client) RunAttributes(ctx context.Context, id uuid.UUID) (map[string]any, error) {
	return c.st.RunAttributes(ctx, c.ns, id)
}

// CountOptions select what Count counts.
type CountOptions struct {
	// Query filters as ListOptions.Query does; "" counts every run.
	Query string
	// GroupBy, a built-in field or a declared attribute, counts per value
	// of it (at most store.MaxCountGroups groups).
	GroupBy string
}

// CountResult is what Count found.
type CountResult struct {
	Total int64
	// Groups, with GroupBy, are the counts per value, biggest first, and
	// Total their sum. Grouped by an attribute, the runs that hold it are
	// counted, as a terms aggregation does: runs without it form no group
	// (count them with `attr IS NULL`); a run with a keyword list counts
	// in each of its values' groups. A group with a nil Value counts the
	// runs whose built-in field is empty (finished_at of live runs, say).
	Groups []store.CountGroup
}

// Count counts the namespace's runs (schedule templates excluded) that
// match o.Query, grouped by o.GroupBy if set. It stops after
// store.QueryTimeout with ErrQueryTimeout.
func (c *Client) Count(ctx context.Context, o CountOptions) (CountResult, error) {
	total, groups, err := c.st.RunsCountQuery(ctx, c.ns, o.Query, o.GroupBy)
	return CountResult{Total: total, Groups: groups}, err
}
