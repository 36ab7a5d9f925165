package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// validate checks the combination; files are read by Options.
func (a *NATSAuth) validate() error {
	methods := 0
	for _, set := range []bool{a.NATSUser != "", a.NATSToken != "", a.NATSNKeySeed != "", a.NATSCreds != ""} {
		if set {
			methods++
		}
	}
	switch {
	case methods > 1:
		return errors.New("set at most one of KAGZI_NATS_USER, KAGZI_NATS_TOKEN, KAGZI_NATS_NKEY_SEED and KAGZI_NATS_CREDS")
	case a.NATSPassword != "" && a.NATSUser == "":
		return errors.New("KAGZI_NATS_PASSWORD is set without KAGZI_NATS_USER")
	case (a.NATSTLSCert == "") != (a.NATSTLSKey == ""):
		return errors.New("KAGZI_NATS_TLS_CERT and KAGZI_NATS_TLS_KEY go together")
	}
	return nil
}

// TLS reports whether the settings ask for TLS.
func (a *NATSAuth) TLS() bool {
	return a.NATSTLSCA != "" || a.NATSTLSCert != "" || a.NATSTLSServerName != ""
}

// Options returns the nats.Options for the credentials and TLS settings.
// Files are read now, so a missing or malformed one fails the start with
// an error naming its variable (never its contents).
func (a NATSAuth) Options() ([]nats.Option, error) {
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var opts []nats.Option
	switch {
	case a.NATSUser != "":
		opts = append(opts, nats.UserInfo(a.NATSUser, a.NATSPassword))
	case a.NATSToken != "":
		opts = append(opts, nats.Token(a.NATSToken))
	case a.NATSNKeySeed != "":
		o, err := nats.NkeyOptionFromSeed(a.NATSNKeySeed)
		if err != nil {
			return nil, fmt.Errorf("%w: KAGZI_NATS_NKEY_SEED %s: %v", ErrInvalid, a.NATSNKeySeed, err)
		}
		opts = append(opts, o)
	case a.NATSCreds != "":
		// The client reads the file at every (re)connect; read it once now
		// so that a wrong path fails the start rather than every reconnect.
		if _, err := os.ReadFile(a.NATSCreds); err != nil {
			return nil, fmt.Errorf("%w: KAGZI_NATS_CREDS: %v", ErrInvalid, err)
		}
		opts = append(opts, nats.UserCredentials(a.NATSCreds))
	}
	if a.TLS() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.NATSTLSServerName}
		if a.NATSTLSCA != "" {
			pem, err := os.ReadFile(a.NATSTLSCA)
			if err != nil {
				return nil, fmt.Errorf("%w: KAGZI_NATS_TLS_CA: %v", ErrInvalid, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: KAGZI_NATS_TLS_CA %s: no PEM certificate in it", ErrInvalid, a.NATSTLSCA)
			}
		}
		if a.NATSTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(a.NATSTLSCert, a.NATSTLSKey)
			if err != nil {
				return nil, fmt.Errorf("%w: KAGZI_NATS_TLS_CERT/KAGZI_NATS_TLS_KEY: %v", ErrInvalid, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// RedactURL hides the secrets of a NATS or Postgres URL (or a
// comma-separated list of NATS URLs) for logs and errors: a password
// becomes "xxxxx", and so does a user alone, which NATS reads as a token.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		// Unparseable: keep only what follows the last '@', if any.
		if at := strings.LastIndexByte(s, '@'); at >= 0 {
			return "xxxxx@" + s[at+1:]
		}
		return s
	}
	if u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else {
		u.User = url.User("xxxxx")
	}
	return u.String()
}
