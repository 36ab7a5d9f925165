package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func init() { register(newAttributeCmd) }

// attributeJSON is one declared attribute as the attribute commands print it.
type attributeJSON struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
}

func newAttributeCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:   "attribute",
		Short: "Declare, list and delete the namespace's search attributes",
		Long: `Search attributes are typed values a run is started with (kagzi run start
--attr, client.StartOptions.Attributes), by which runs are listed and
counted (kagzi run list --query, kagzi run count). Each is declared once per
namespace with a kind: keyword (matched whole; a run may hold a list of
them), text (up to 2 KiB), int, float, bool or time (RFC 3339).`,
		Example: `  kagzi attribute declare customer keyword
  kagzi attribute declare amount int
  kagzi attribute list
  kagzi attribute delete amount`,
	})
	c.AddCommand(newAttributeDeclareCmd(a), newAttributeListCmd(a), newAttributeDeleteCmd(a))
	return c
}

func newAttributeDeclareCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "declare NAME KIND",
		Short: "Declare a search attribute: KIND is keyword, text, int, float, bool or time",
		Long: `Declare a search attribute of the namespace. Declaring it again with the same
kind does nothing; with another kind is refused. A name is a letter then
letters, digits or '_' (at most 64), not a built-in field of queries; a
namespace declares at most 100.`,
		Example: `  kagzi attribute declare customer keyword
  kagzi attribute declare due time`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.AttributesDeclare(cmd.Context(), a.Namespace, args[0], store.AttributeKind(strings.ToLower(args[1]))); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintf(cmd.OutOrStdout(), "Declared %s (%s)\n", args[0], strings.ToLower(args[1]))
			}
			return nil
		},
	}
}

func newAttributeListCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the namespace's search attributes",
		Example: `  kagzi attribute list
  kagzi --json attribute list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			attrs, err := st.AttributesList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			out := make([]attributeJSON, len(attrs))
			for i, at := range attrs {
				out[i] = attributeJSON{Name: at.Name, Kind: string(at.Kind), CreatedAt: at.CreatedAt}
			}
			return a.Print(cmd, out, func(w io.Writer) {
				if len(attrs) == 0 {
					fmt.Fprintln(w, "No search attributes declared.")
					return
				}
				fmt.Fprintln(w, "NAME\tKIND\tDECLARED")
				for _, at := range attrs {
					fmt.Fprintf(w, "%s\t%s\t%s\n", at.Name, at.Kind, cliutil.FmtTimeMS(&at.CreatedAt))
				}
			})
		},
	}
}

func newAttributeDeleteCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a search attribute's declaration (refused while runs hold values of it)",
		Long: `Delete a declaration. While a run holds a value of the attribute it is
refused: the values would outlive their kind. Runs let go of it as
retention deletes them.`,
		Example: `  kagzi attribute delete amount`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.AttributesDelete(cmd.Context(), a.Namespace, args[0]); err != nil {
				return err
			}
			if !a.JSON {
				fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s\n", args[0])
			}
			return nil
		},
	}
}

// countJSON is what `run count` prints with --json.
type countJSON struct {
	Total  int64            `json:"total"`
	Groups []countGroupJSON `json:"groups,omitempty"`
}

type countGroupJSON struct {
	Value *string `json:"value"`
	Count int64   `json:"count"`
}

func newRunCountCmd(a *cliutil.App) *cobra.Command {
	var query, groupBy string
	c := &cobra.Command{
		Use:   "count",
		Short: "Count runs matching a query, optionally grouped by a field",
		Long: `Count the namespace's runs (schedule templates excluded) that match --query
(the language of kagzi run list --query; none counts every run). With
--group-by, a built-in field or a declared attribute, it counts per value,
biggest first, at most 1000 groups; "-" stands for runs without the
attribute. A count that runs longer than 10s is stopped: narrow the query.`,
		Example: `  kagzi run count --query 'customer = "42" AND status = "FAILED"'
  kagzi run count --group-by status
  kagzi --json run count --query 'created_at > "2025-01-01T00:00:00Z"' --group-by customer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			total, groups, err := st.RunsCountQuery(cmd.Context(), a.Namespace, query, groupBy)
			if err != nil {
				return err
			}
			res := countJSON{Total: total}
			for _, g := range groups {
				res.Groups = append(res.Groups, countGroupJSON{Value: g.Value, Count: g.Count})
			}
			return a.Print(cmd, res, func(w io.Writer) {
				if groupBy == "" {
					fmt.Fprintf(w, "%d\n", total)
					return
				}
				fmt.Fprintf(w, "%s\tCOUNT\n", strings.ToUpper(groupBy))
				for _, g := range groups {
					v := "-"
					if g.Value != nil {
						v = *g.Value
					}
					fmt.Fprintf(w, "%s\t%d\n", v, g.Count)
				}
				fmt.Fprintf(w, "TOTAL\t%d\n", total)
			})
		},
	}
	c.Flags().StringVar(&query, "query", "", `only runs matching this query, e.g. 'customer = "42" AND status = "FAILED"'`)
	c.Flags().StringVar(&groupBy, "group-by", "", "count per value of this field (built-in or declared attribute)")
	return c
}

// fmtAttr writes an attribute's value for a table.
func fmtAttr(v any) string {
	switch x := v.(type) {
	case []string:
		return strings.Join(x, ", ")
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}
