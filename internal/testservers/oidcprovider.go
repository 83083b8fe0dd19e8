package testservers

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The client the OIDC provider issues tokens to (internal/testservers/oidcop).
const (
	oidcClientID     = "switchboard-test"
	oidcClientSecret = "switchboard-test-secret"
)

// oidcStartTimeout bounds the provider's start (build excluded) and every token request.
const oidcStartTimeout = 30 * time.Second

var (
	oidcopOnce sync.Once
	oidcopPath string
	oidcopErr  error
)

// oidcopBinary builds internal/testservers/oidcop once per test process into a temporary
// directory (the Go build cache makes later builds cheap).
func oidcopBinary() (string, error) {
	oidcopOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oidcop-")
		if err != nil {
			oidcopErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		bin := filepath.Join(dir, "oidcop")
		cmd := exec.Command("go", "build", "-o", bin, "./internal/testservers/oidcop")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			oidcopErr = fmt.Errorf("go build oidcop: %w\n%s", err, out)
			return
		}
		oidcopPath = bin
	})
	return oidcopPath, oidcopErr
}

// OIDCProvider is a running OpenID Provider process (zitadel/oidc v3's OP, see
// internal/testservers/oidcop) serving HTTPS on 127.0.0.1 with a certificate of its own CA.
type OIDCProvider struct {
	// Issuer is the provider's issuer URL, https://127.0.0.1:<port>.
	Issuer string
	// CAPEM is the PEM of the CA that signed its serving certificate.
	CAPEM []byte

	cmd    *exec.Cmd
	client *http.Client
	done   chan struct{}
}

// StartOIDCProvider builds (once) and starts an OpenID Provider process. Close stops it.
func StartOIDCProvider() (*OIDCProvider, error) {
	bin, err := oidcopBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oidcop-run-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-dir", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &OIDCProvider{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	issuer := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "issuer="); ok {
				issuer <- v
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case p.Issuer = <-issuer:
	case <-p.done:
		return nil, errors.New("oidcop exited before it served")
	case <-time.After(oidcStartTimeout):
		p.Close()
		return nil, errors.New("oidcop did not start in time")
	}
	if p.CAPEM, err = os.ReadFile(filepath.Join(dir, "ca.pem")); err != nil {
		p.Close()
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	p.client = &http.Client{
		Timeout:   oidcStartTimeout,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	return p, nil
}

// Close stops the provider and waits for it to exit.
func (p *OIDCProvider) Close() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stopped reports whether the provider process has exited.
func (p *OIDCProvider) Stopped() <-chan struct{} { return p.done }

// TokenOptions shape a token.
type TokenOptions struct {
	// Audiences of the token; default the client id.
	Audiences []string
	// Subject (`sub`); default the client id.
	Subject string
	// TTL is the token's lifetime, whole seconds; default 5 minutes.
	TTL time.Duration
	// Claims are private claims: each value is marshalled to JSON; a []string becomes a list.
	Claims map[string]any
}

// Token returns a JWT access token the provider issued through the client_credentials grant.
func (p *OIDCProvider) Token(ctx context.Context, o TokenOptions) (string, error) {
	var scopes []string
	for _, a := range o.Audiences {
		scopes = append(scopes, "aud:"+a)
	}
	if o.Subject != "" {
		scopes = append(scopes, "sub:"+o.Subject)
	}
	if o.TTL > 0 {
		scopes = append(scopes, "ttl:"+strconv.Itoa(int(o.TTL/time.Second)))
	}
	for name, v := range o.Claims {
		vs, isList := v.([]string)
		if !isList {
			b, err := json.Marshal(v)
			if err != nil {
				return "", err
			}
			scopes = append(scopes, "claim:"+name+"="+string(b))
			continue
		}
		if len(vs) == 1 { // one value would come back as a string; force a list with a second
			return "", errors.New("a list claim needs at least two values")
		}
		for _, s := range vs {
			scopes = append(scopes, "claim:"+name+"="+s)
		}
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(oidcClientID, oidcClientSecret)
	resp, err := p.client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint: %s: %s", resp.Status, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("token endpoint: no access_token in %s", body)
	}
	return tr.AccessToken, nil
}
