package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
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

// PKI file names inside DIR/pki.
const (
	caCert       = "ca.crt"        // serving CA (kubeconfig certificate-authority-data)
	caKey        = "ca.key"        //
	servingCert  = "serving.crt"   // --tls-cert-file (127.0.0.1, ::1, localhost)
	servingKey   = "serving.key"   // --tls-private-key-file
	clientCACert = "client-ca.crt" // --client-ca-file
	clientCAKey  = "client-ca.key" //
	adminCert    = "admin.crt"     // CN=admin, O=system:masters, signed by client CA
	adminKey     = "admin.key"     //
	saKey        = "sa.key"        // --service-account-signing-key-file (RSA)
	saPub        = "sa.pub"        // --service-account-key-file
)

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

func newECKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func newCA(cn string) (*keyPair, error) {
	key, err := newECKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"lookout-testbed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func (ca *keyPair) sign(tmpl *x509.Certificate) (*keyPair, error) {
	key, err := newECKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(k crypto.Signer) ([]byte, error) {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	default:
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
}

func (kp *keyPair) write(dir, certName, keyName string) error {
	if err := os.WriteFile(filepath.Join(dir, certName), certPEM(kp.cert), 0o644); err != nil {
		return err
	}
	kb, err := keyPEM(kp.key)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, keyName), kb, 0o600)
}

// generatePKI writes a fresh set of certificates and keys into pkiDir.
func generatePKI(pkiDir string) error {
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	ca, err := newCA("lookout-testbed-ca")
	if err != nil {
		return err
	}
	if err := ca.write(pkiDir, caCert, caKey); err != nil {
		return err
	}
	serving, err := ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return err
	}
	if err := serving.write(pkiDir, servingCert, servingKey); err != nil {
		return err
	}
	clientCA, err := newCA("lookout-testbed-client-ca")
	if err != nil {
		return err
	}
	if err := clientCA.write(pkiDir, clientCACert, clientCAKey); err != nil {
		return err
	}
	admin, err := clientCA.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	if err := admin.write(pkiDir, adminCert, adminKey); err != nil {
		return err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPriv, err := keyPEM(sa)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pkiDir, saKey), saPriv, 0o600); err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pkiDir, saPub),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}
