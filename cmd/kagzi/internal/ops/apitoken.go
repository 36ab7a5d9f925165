package ops

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

// NewAPITokenCmd builds `kagzi apitoken`: the bearer tokens of the HTTP
// API the web console serves under /v1/ (docs/http-api.md).
func NewAPITokenCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "apitoken",
		Aliases: []string{"apitokens"},
		Short:   "Manage the bearer tokens of the HTTP API (/v1/ on the console)",
		Example: `  kagzi apitoken create ci --scope runs:start,runs:read --expires 720h
  kagzi apitoken list
  kagzi apitoken revoke ci`,
	})
	c.AddCommand(newAPITokenCreateCmd(a), newAPITokenListCmd(a), newAPITokenRevokeCmd(a))
	return c
}

// APITokenJSON is a token as `apitoken` prints it with --json; Secret
// only when it is made.
type APITokenJSON struct {
	ID        uuid.UUID  `json:"token_id"`
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Scopes    []string   `json:"scopes"`
	Rate      int        `json:"rate"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Secret    string     `json:"secret,omitempty"`
}

func toAPITokenJSON(t store.APIToken, secret string) APITokenJSON {
	return APITokenJSON{ID: t.ID, Name: t.Name, Namespace: t.Namespace, Scopes: t.Scopes, Rate: t.Rate, CreatedAt: t.CreatedAt.UTC(),
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, Secret: secret}
}

func expiry(t store.APIToken) string {
	if t.ExpiresAt == nil {
		return "never"
	}
	return t.ExpiresAt.UTC().Format(time.RFC3339)
}

func newAPITokenCreateCmd(a *cliutil.App) *cobra.Command {
	var (
		scopes string
		p      store.APITokenParams
	)
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a token; its secret is printed once",
		Long: fmt.Sprintf(`Create bearer token NAME of the namespace for the HTTP API (/v1/ on the web
console, docs/http-api.md). --scope lists what it may do, comma-separated:
%s. Its secret is printed once and
only its SHA-256 is stored: keep it, or revoke the token and make another.
--expires gives it a lifetime (at most %s; default none). --rate is the
requests per second it may make of one console process (default %d, at
most %d). A namespace holds at most %d live tokens; a name is at most %d
bytes.`, strings.Join(store.APIScopes, ", "), store.MaxAPITokenTTL, store.DefaultAPITokenRate, store.MaxAPITokenRate,
			store.MaxAPITokens, store.MaxAPITokenName),
		Example: `  kagzi apitoken create ci --scope runs:start,runs:read --expires 720h
  kagzi --json apitoken create billing --scope events:publish --rate 50 | jq -r .secret`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			p.Namespace, p.Name = a.Namespace, args[0]
			p.Scopes = nil
			for _, s := range strings.Split(scopes, ",") {
				if s = strings.TrimSpace(s); s != "" {
					p.Scopes = append(p.Scopes, s)
				}
			}
			tok, secret, err := st.APITokensCreate(cmd.Context(), p)
			if err != nil {
				return err
			}
			return a.Print(cmd, toAPITokenJSON(tok, secret), func(out io.Writer) {
				fmt.Fprintf(out, "Created token %s (%s; %d req/s; expires %s).\n", tok.Name, strings.Join(tok.Scopes, ","), tok.Rate, expiry(tok))
				fmt.Fprintf(out, "Secret (shown once): %s\n", secret)
			})
		},
	}
	c.Flags().StringVar(&scopes, "scope", "", "comma-separated scopes: "+strings.Join(store.APIScopes, ",")+" (required)")
	c.Flags().DurationVar(&p.TTL, "expires", 0, "the token's lifetime (default: it does not expire)")
	c.Flags().IntVar(&p.Rate, "rate", store.DefaultAPITokenRate, "requests per second per console process")
	_ = c.MarkFlagRequired("scope")
	return c
}

func newAPITokenListCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the namespace's live tokens (never their secrets)",
		Example: `  kagzi apitoken list
  kagzi --json apitoken list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			ts, err := st.APITokensList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			v := struct {
				Tokens []APITokenJSON `json:"tokens"`
			}{Tokens: make([]APITokenJSON, len(ts))}
			for i, t := range ts {
				v.Tokens[i] = toAPITokenJSON(t, "")
			}
			return a.Print(cmd, v, func(out io.Writer) {
				if len(ts) == 0 {
					fmt.Fprintf(out, "No API tokens in namespace %q.\n", a.Namespace)
					return
				}
				fmt.Fprintln(out, "NAME\tSCOPES\tRATE\tCREATED\tEXPIRES")
				for _, t := range ts {
					fmt.Fprintf(out, "%s\t%s\t%d\t%s\t%s\n", t.Name, strings.Join(t.Scopes, ","), t.Rate, t.CreatedAt.UTC().Format(time.RFC3339), expiry(t))
				}
			})
		},
	}
}

func newAPITokenRevokeCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke NAME",
		Short:   "Revoke a token: requests with it are refused (401) from now on",
		Example: `  kagzi apitoken revoke ci`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			tok, err := st.APITokensRevoke(cmd.Context(), a.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.Print(cmd, toAPITokenJSON(tok, ""), func(out io.Writer) {
				fmt.Fprintf(out, "Revoked token %s.\n", tok.Name)
			})
		},
	}
}
