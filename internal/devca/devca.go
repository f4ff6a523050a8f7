// Package devca makes throwaway certificate authorities: the demo's
// cluster and the tests' close their members' connections with mutual TLS
// (membership.Config.TLS), and need an authority and member certificates
// that exist only for the run. Users bring their own authority.
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity is how long the certificates are good for, from an hour
// before they are made (clocks of the machine's processes may differ a
// little): long enough for any run, and the files go with the run.
const validity = 30 * 24 * time.Hour

// Authority is a certificate authority whose key lives only in memory.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

// New returns a new authority named name, with an ECDSA P-256 key.
func New(name string) (*Authority, error) {
	key, tmpl, err := newKey(name)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	tmpl.BasicConstraintsValid, tmpl.IsCA, tmpl.MaxPathLenZero = true, true, true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("devca: %w", err)
	}
	return &Authority{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// CertPEM returns the authority's certificate, PEM-encoded: what every
// member trusts.
func (a *Authority) CertPEM() []byte { return a.certPEM }

// Issue returns a new certificate named name and its key, both
// PEM-encoded, for a member reachable at hosts (IP addresses or DNS
// names): good to serve the member's port and to connect to other
// members' ports.
func (a *Authority) Issue(name string, hosts ...string) (certPEM, keyPEM []byte, err error) {
	key, tmpl, err := newKey(name)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("devca: %w", err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("devca: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}), nil
}

// Files are the paths of an authority's certificate and of a member's
// certificate and key, as membership.LoadTLS takes them.
type Files struct {
	CA, Cert, Key string
}

// Write writes into dir the authority's certificate (ca.pem) and a new
// certificate for a member at hosts (NAME.pem) with its key (NAME-key.pem,
// readable by its owner only).
func (a *Authority) Write(dir, name string, hosts ...string) (Files, error) {
	cert, key, err := a.Issue(name, hosts...)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	for _, w := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{f.CA, a.certPEM, 0o644}, {f.Cert, cert, 0o644}, {f.Key, key, 0o600}} {
		if err := os.WriteFile(w.path, w.data, w.perm); err != nil {
			return Files{}, fmt.Errorf("devca: %w", err)
		}
	}
	return f, nil
}

// Generate makes a new authority and writes its certificate and one
// member certificate for hosts into dir (Write, named "member"): every
// member of a demo or test cluster on one machine can share it.
func Generate(dir string, hosts ...string) (Files, error) {
	a, err := New("actorsnap throwaway authority")
	if err != nil {
		return Files{}, err
	}
	return a.Write(dir, "member", hosts...)
}

// serialNumber returns a random 128-bit serial number.
// newKey returns a new ECDSA P-256 key and the template of a certificate
// named name for it: a random 128-bit serial number, valid from an hour
// ago (clocks differ a little) for validity; its uses are the caller's.
func newKey(name string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("devca: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("devca: %w", err)
	}
	now := time.Now()
	return key, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
	}, nil
}
