package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/redistest"
)

// writeCerts makes a CA and a server certificate for 127.0.0.1 in dir and
// returns the paths of the CA, the server certificate and its key.
func writeCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "keylock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestCLIOverTLS: rediss:// with -tls-ca talks TLS to the server; without
// the CA the certificate is refused with a clear error.
func TestCLIOverTLS(t *testing.T) {
	ca, cert, key := writeCerts(t, t.TempDir())
	addr := redistest.NewServer(t, redistest.WithTLS(cert, key, ca)).TLSAddr()
	url := "rediss://" + addr
	out, stderr, code := cli(t, "-redis", url, "-tls-ca", ca, "-json", "show", "x")
	if code != exitNotFound || !strings.Contains(out, `"held": false`) {
		t.Errorf("show over TLS with the CA: exit %d, %s%s", code, out, stderr)
	}
	_, stderr, code = cli(t, "-redis", url, "-timeout", "3s", "show", "x")
	if code != exitError || !strings.Contains(stderr, "certificate") {
		t.Errorf("TLS without the CA: exit %d, stderr %q; want 1 and a certificate error", code, stderr)
	}
	if _, stderr, code := cli(t, "-redis", addr, "-tls-ca", ca, "show", "x"); code != exitUsage || !strings.Contains(stderr, "rediss://") {
		t.Errorf("-tls-ca without rediss://: exit %d, stderr %q; want 2 saying it needs rediss://", code, stderr)
	}
}
