package testnats

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/natsauth"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// Observer is the user with every permission that AuthServer adds for the
// test's own inspection: it is no role of Kagzi's.
const Observer = "observer"

// AuthOptions configure StartAuth.
type AuthOptions struct {
	// Namespaces and Workers as for `kagzi nats-config`.
	Namespaces, Workers []string
	// MaxPayload is the message size limit (default MaxPayload).
	MaxPayload int32
	// TLS turns TLS on, with client certificates required (mutual TLS),
	// from a throwaway CA.
	TLS bool
}

// AuthServer is a server started with the configuration `kagzi
// nats-config` generates, with a random password per user.
type AuthServer struct {
	*Server
	passwords map[string]string
	// TLS holds the client side of TLS (CA, client certificate and key
	// files) when the server requires it.
	TLS config.NATSAuth
}

// StartAuth starts a server with the generated users of o (and an
// Observer), shut down when t ends.
func StartAuth(t testing.TB, o AuthOptions) *AuthServer {
	t.Helper()
	users, err := natsauth.Users(natsauth.Options{Namespaces: o.Namespaces, Workers: o.Workers})
	if err != nil {
		t.Fatal(err)
	}
	users = append(users, natsauth.User{Name: Observer, Permission: protocol.Permission{Publish: []string{">"}, Subscribe: []string{">"}}})
	pw := make(map[string]string, len(users))
	for _, u := range users {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		pw[u.Name] = hex.EncodeToString(b)
	}
	s := &AuthServer{passwords: pw}
	var tlsBlock natsauth.TLS
	if o.TLS {
		dir := t.TempDir()
		ca, caKey := writeCA(t, dir)
		tlsBlock = natsauth.TLS{CAFile: filepath.Join(dir, "ca.pem"), Verify: true}
		tlsBlock.CertFile, tlsBlock.KeyFile = writeLeaf(t, dir, "server", ca, caKey)
		s.TLS.NATSTLSCA = tlsBlock.CAFile
		s.TLS.NATSTLSCert, s.TLS.NATSTLSKey = writeLeaf(t, dir, "client", ca, caKey)
	}
	conf := natsauth.Render(users, pw, tlsBlock)
	if o.MaxPayload > 0 {
		conf += fmt.Sprintf("max_payload: %d\n", o.MaxPayload)
	}
	s.Server = StartConfig(t, conf)
	// A plain Connect is the Observer's, so that what a test inspects on
	// the side needs no role.
	s.defaults = s.Options(t, Observer, "", "")
	return s
}

// Password is the password of user.
func (s *AuthServer) Password(user string) string { return s.passwords[user] }

// Options are the connection options of role as Kagzi's processes set
// them: credentials, TLS, and the role's inbox prefix.
func (s *AuthServer) Options(t testing.TB, role, namespace, identity string) []nats.Option {
	t.Helper()
	user := natsauth.UserName(role, namespace, identity)
	auth := s.TLS
	auth.NATSUser, auth.NATSPassword = user, s.passwords[user]
	opts, err := auth.Options()
	if err != nil {
		t.Fatal(err)
	}
	switch role {
	case protocol.RoleWorker:
		opts = append(opts, nats.CustomInboxPrefix(protocol.WorkerInbox(namespace, identity)))
	case protocol.RoleClient:
		opts = append(opts, nats.CustomInboxPrefix(protocol.ClientInbox(namespace)))
	case Observer:
		// Under kagzi.v1.inbox, where the dispatcher may reply and deliver.
		opts = append(opts, nats.CustomInboxPrefix(protocol.ServiceInbox(Observer)))
	default:
		opts = append(opts, nats.CustomInboxPrefix(protocol.ServiceInbox(role)))
	}
	return opts
}

// ConnectAs connects as role, closed when t ends. Permission violations
// and other asynchronous errors are sent to errs, if given.
func (s *AuthServer) ConnectAs(t testing.TB, errs chan<- error, role, namespace, identity string) *nats.Conn {
	t.Helper()
	opts := s.Options(t, role, namespace, identity)
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	}
	return s.Connect(t, opts...)
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeCA(t testing.TB, dir string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kagzi test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// writeLeaf writes a certificate for 127.0.0.1 and localhost, good for
// server and client authentication, and its key; it returns their paths.
func writeLeaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, key, "EC PRIVATE KEY", kder)
	return cert, key
}
