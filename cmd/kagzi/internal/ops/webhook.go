package ops

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/webhook"
)

// NewWebhookCmd builds `kagzi webhook`: webhook sources whose signed
// deliveries become published events (docs/webhooks.md).
func NewWebhookCmd(a *cliutil.App) *cobra.Command {
	c := cliutil.GroupCmd(&cobra.Command{
		Use:     "webhook",
		Aliases: []string{"webhooks"},
		Short:   "Manage webhook sources: signed deliveries that become events",
		Example: `  kagzi webhook create github --kind github --secret-env GITHUB_WEBHOOK_SECRET --event 'github.{event}'
  kagzi webhook list
  kagzi webhook delete github`,
	})
	c.AddCommand(newWebhookCreateCmd(a), newWebhookListCmd(a), newWebhookDeleteCmd(a))
	return c
}

// WebhookJSON is a webhook source as `webhook create` and `webhook list`
// print it with --json: never with its secret.
type WebhookJSON struct {
	ID        uuid.UUID `json:"source_id"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Event     string    `json:"event"`
	Tolerance string    `json:"tolerance"`
	Path      string    `json:"path"`
	CreatedAt time.Time `json:"created_at"`
}

func toWebhookJSON(w store.WebhookSource) WebhookJSON {
	return WebhookJSON{ID: w.ID, Name: w.Name, Kind: string(w.Kind), Event: w.Template, Tolerance: w.Tolerance.String(),
		Path: "/webhooks/" + w.Name, CreatedAt: w.CreatedAt.UTC()}
}

func newWebhookCreateCmd(a *cliutil.App) *cobra.Command {
	var (
		kind, secret, secretEnv string
		w                       store.WebhookSource
	)
	c := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a webhook source: POST /webhooks/NAME on the console",
		Long: `Create webhook source NAME: the web console's POST /webhooks/NAME accepts
its deliveries signed with the secret, and publishes each as an event named
--event, where {event} is the delivery's event type (GitHub's X-GitHub-Event,
Stripe's "type", the generic form's X-Kagzi-Event); triggers matching it
start runs. --kind is github (X-Hub-Signature-256), stripe
(Stripe-Signature) or generic (X-Kagzi-Signature, see docs/webhooks.md).
The secret (16 to 512 bytes) is read from the environment variable
--secret-env names, or given with --secret; it is stored as given, since it
keys the HMAC, and never printed. --tolerance bounds how old a Stripe or
generic signature's timestamp may be (default 5m, at most 1h). A replayed
delivery is refused. A namespace holds at most 100 sources.`,
		Example: `  kagzi webhook create github --kind github --secret-env GITHUB_WEBHOOK_SECRET --event 'github.{event}'
  kagzi webhook create stripe --kind stripe --secret-env STRIPE_WEBHOOK_SECRET --event 'stripe.{event}'
  kagzi webhook create shop --kind generic --secret-env SHOP_SECRET --event 'shop.order.placed' --tolerance 2m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case (secret == "") == (secretEnv == ""):
				return fmt.Errorf("give the secret with exactly one of --secret-env or --secret")
			case secretEnv != "":
				v, ok := os.LookupEnv(secretEnv)
				if !ok || v == "" {
					return fmt.Errorf("--secret-env: environment variable %q is not set", secretEnv)
				}
				secret = v
			}
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			w.Namespace, w.Name, w.Kind, w.Secret = a.Namespace, args[0], webhook.Kind(kind), []byte(secret)
			made, err := st.WebhookSourcesCreate(cmd.Context(), w)
			if err != nil {
				return err
			}
			return a.Print(cmd, toWebhookJSON(made), func(out io.Writer) {
				fmt.Fprintf(out, "Created webhook source %s (%s): POST /webhooks/%s publishes %s.\n", made.Name, made.Kind, made.Name, made.Template)
			})
		},
	}
	c.Flags().StringVar(&kind, "kind", "", "the signature format: github, stripe or generic (required)")
	c.Flags().StringVar(&secretEnv, "secret-env", "", "the environment variable that holds the shared secret")
	c.Flags().StringVar(&secret, "secret", "", "the shared secret (prefer --secret-env: a flag shows in the process list)")
	c.Flags().StringVar(&w.Template, "event", "", "the event name; {event} is the delivery's event type (required)")
	c.Flags().DurationVar(&w.Tolerance, "tolerance", webhook.DefaultTolerance, "how far a signature's timestamp may be from now (stripe, generic; at most 1h)")
	_ = c.MarkFlagRequired("kind")
	_ = c.MarkFlagRequired("event")
	return c
}

func newWebhookListCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the namespace's webhook sources (never their secrets)",
		Example: `  kagzi webhook list
  kagzi --json webhook list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			ws, err := st.WebhookSourcesList(cmd.Context(), a.Namespace)
			if err != nil {
				return err
			}
			v := struct {
				Sources []WebhookJSON `json:"sources"`
			}{Sources: make([]WebhookJSON, len(ws))}
			for i, w := range ws {
				v.Sources[i] = toWebhookJSON(w)
			}
			return a.Print(cmd, v, func(out io.Writer) {
				if len(ws) == 0 {
					fmt.Fprintf(out, "No webhook sources in namespace %q.\n", a.Namespace)
					return
				}
				fmt.Fprintln(out, "NAME\tKIND\tEVENT\tTOLERANCE\tPATH")
				for _, w := range ws {
					fmt.Fprintf(out, "%s\t%s\t%s\t%s\t/webhooks/%s\n", w.Name, w.Kind, w.Template, w.Tolerance, w.Name)
				}
			})
		},
	}
}

func newWebhookDeleteCmd(a *cliutil.App) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   "Delete a webhook source (the events it published stay)",
		Example: `  kagzi webhook delete github`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.Store(cmd.Context())
			if err != nil {
				return err
			}
			if err := st.WebhookSourcesDelete(cmd.Context(), a.Namespace, args[0]); err != nil {
				return err
			}
			return a.Print(cmd, map[string]string{"deleted": args[0]}, func(out io.Writer) {
				fmt.Fprintf(out, "Deleted webhook source %s.\n", args[0])
			})
		},
	}
}
