// Command oidcop is the OpenID Provider tests authenticate against: zitadel/oidc v3's OP (an
// OpenID-certified library) with its example in-memory storage, serving HTTPS on 127.0.0.1 with
// a certificate of a CA it generates. It issues JWT access tokens to one client through the
// client_credentials grant; the requested scopes shape the token (tests need other audiences,
// lifetimes and claims than a real client would get):
//
//	aud:<audience>      an audience (repeatable; default the client id)
//	ttl:<seconds>       the lifetime (default 300)
//	sub:<subject>       the subject (default the client id)
//	claim:<name>=<json> a private claim; the value is JSON, or a string if it is not JSON
//	                    (repeatable; the same name twice makes a list)
//
// It writes ca.pem into -dir and then prints "issuer=<url>" on stdout. Started by
// internal/testservers.StartOIDCProvider.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// The one client; tests send these credentials.
const (
	clientID     = "switchboard-test"
	clientSecret = "switchboard-test-secret"
	defaultTTL   = 300 * time.Second
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	dir := flag.String("dir", "", "directory to write ca.pem into")
	flag.Parse()
	if err := run(*addr, *dir); err != nil {
		log.Fatal(err)
	}
}

func run(addr, dir string) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	issuer := "https://" + ln.Addr().String()
	caPEM, cert, err := certificates(ln.Addr().(*net.TCPAddr).IP)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), caPEM, 0o600); err != nil {
		return err
	}
	st := &tokenStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer))}
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte(issuer))}, st, op.StaticIssuer(issuer))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           provider,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Printf("issuer=%s\n", issuer)
	return srv.ServeTLS(ln, "", "")
}

// certificates returns a new CA's PEM and a serving certificate it signed for ip and localhost.
func certificates(ip net.IP) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oidcop test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "oidcop"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{ip}, DNSNames: []string{"localhost"},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, nil
}

// tokenStorage is the example storage with a client_credentials client whose scopes shape
// its JWT access tokens (see the package comment).
type tokenStorage struct {
	*storage.Storage
}

type jwtClient struct{ *storage.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (jwtClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (jwtClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (s *tokenStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	if id != clientID || secret != clientSecret {
		return nil, errors.New("wrong client or secret")
	}
	return jwtClient{storage.WebClient(clientID, clientSecret)}, nil
}

// shapedRequest is a client_credentials token request shaped by its scopes.
type shapedRequest struct {
	oidc.JWTTokenRequest
	ttl time.Duration
}

func (s *tokenStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if id != clientID {
		return nil, errors.New("wrong client")
	}
	r := &shapedRequest{JWTTokenRequest: oidc.JWTTokenRequest{Subject: id, Scopes: scopes}, ttl: defaultTTL}
	for _, sc := range scopes {
		k, v, _ := strings.Cut(sc, ":")
		switch k {
		case "aud":
			r.Audience = append(r.Audience, v)
		case "sub":
			r.Subject = v
		case "ttl":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("bad ttl scope %q", sc)
			}
			r.ttl = time.Duration(n) * time.Second
		}
	}
	if len(r.Audience) == 0 {
		r.Audience = []string{id}
	}
	return r, nil
}

func (s *tokenStorage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	ttl := defaultTTL
	if r, ok := req.(*shapedRequest); ok {
		ttl = r.ttl
	}
	return uuid.NewString(), time.Now().Add(ttl), nil
}

// GetPrivateClaimsFromScopes turns claim:<name>=<json> scopes into claims.
func (s *tokenStorage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	claims := map[string]any{}
	for _, sc := range scopes {
		rest, ok := strings.CutPrefix(sc, "claim:")
		if !ok {
			continue
		}
		name, raw, _ := strings.Cut(rest, "=")
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			v = raw
		}
		switch old := claims[name].(type) {
		case nil:
			claims[name] = v
		case []any:
			claims[name] = append(old, v)
		default:
			claims[name] = []any{old, v}
		}
	}
	return claims, nil
}
