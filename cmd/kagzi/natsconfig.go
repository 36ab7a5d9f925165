package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/natsauth"
)

func init() { register(newNATSConfigCmd) }

func newNATSConfigCmd(_ *cliutil.App) *cobra.Command {
	var o natsauth.Options
	c := &cobra.Command{
		Use:   "nats-config",
		Short: "Print the nats-server users and permissions of Kagzi's roles",
		Long: `Prints a nats-server configuration block with one user per role:
dispatcher, scheduler, reaper and console, and per namespace a client
(client-<ns>) and one worker per identity (worker-<ns>-<identity>; by
default the identity "worker"). Each user may publish and subscribe only to
the subjects its role needs (docs/security.md); a worker reads only its
own identity's inbox (KAGZI_WORKER_IDENTITY) and its namespace's subjects.

Passwords are not in the output: nats-server reads each from its
environment variable, named in the output (KAGZI_NATS_PASSWORD_<USER>).
Include the block from the server's configuration file, or pass
--tls-cert/--tls-key (and --tls-ca --tls-verify for client certificates)
to have it turn TLS on too.`,
		Example: `  kagzi nats-config --namespace default --namespace orders > auth.conf
  kagzi nats-config --worker orders/billing --worker orders/shipping
  kagzi nats-config --tls-cert server.pem --tls-key server-key.pem --tls-ca ca.pem --tls-verify`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conf, err := natsauth.Config(o)
			if err != nil {
				return cliutil.Usagef("%v", err)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), conf)
			return err
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.Namespaces, "namespace", nil, "a namespace to serve (repeatable; default: default)")
	f.StringArrayVar(&o.Workers, "worker", nil, "a worker identity as NAMESPACE/IDENTITY (repeatable; default: NAMESPACE/worker)")
	f.StringVar(&o.TLS.CertFile, "tls-cert", "", "server certificate file: adds a tls block")
	f.StringVar(&o.TLS.KeyFile, "tls-key", "", "server certificate key file")
	f.StringVar(&o.TLS.CAFile, "tls-ca", "", "CA file verifying client certificates")
	f.BoolVar(&o.TLS.Verify, "tls-verify", false, "require client certificates signed by --tls-ca")
	return c
}
