package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Limits of the bearer token and of what a server's refusal may make the client parse.
const (
	// MaxTokenBytes bounds a bearer token, as the sidecar does: a larger one is refused here
	// rather than sent.
	MaxTokenBytes = 16 << 10
	// maxTokenFileBytes bounds a token file read (the token plus surrounding whitespace).
	maxTokenFileBytes = 64 << 10
	// tokenFileMaxAge re-reads a token file at least this often even when its stat looks the
	// same (a same-size rewrite within a coarse mtime tick); a stat per request catches the rest.
	tokenFileMaxAge = time.Minute
	// maxChallengeBytes bounds the WWW-Authenticate fields parsed (all of them together): a
	// longer challenge is reported unparsed.
	maxChallengeBytes = 8 << 10
	// maxChallenges and maxChallengeParams bound what one WWW-Authenticate value may hold.
	maxChallenges      = 16
	maxChallengeParams = 32
	// maxErrorTextBytes bounds the server-provided strings an error carries into messages.
	maxErrorTextBytes = 512
)

// TokenSource returns the bearer token to send (without "Bearer "). It is called for every
// HTTP request the client makes without a context credential (WithCredential), so it must be
// cheap and safe for concurrent use: cache, and refresh when the token nears its end. Every
// token it returns must be the same caller's: results the server marks private are cached per
// token source, not per token (a rotated token keeps its cache).
type TokenSource func(ctx context.Context) (string, error)

// StaticToken is a TokenSource that always returns tok.
func StaticToken(tok string) TokenSource {
	return func(context.Context) (string, error) { return tok, nil }
}

// TokenFile is a TokenSource that reads the token from a file (surrounding whitespace dropped)
// and reads it again when the file changes: a projected ServiceAccount token, which the kubelet
// replaces (an atomic rename) well before it expires. Each call stats the file; it is read again
// when its identity, size or modification time changed, or after tokenFileMaxAge.
func TokenFile(path string) TokenSource {
	tf := &tokenFile{path: path}
	return tf.token
}

// tokenFile caches one file's token; mu guards the fields below it.
type tokenFile struct {
	path string

	mu   sync.Mutex
	fi   os.FileInfo // the stat the cached token was read under
	tok  string
	read time.Time
}

func (f *tokenFile) token(context.Context) (string, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fi != nil && os.SameFile(f.fi, fi) && f.fi.Size() == fi.Size() && f.fi.ModTime().Equal(fi.ModTime()) &&
		time.Since(f.read) < tokenFileMaxAge {
		return f.tok, nil
	}
	h, err := os.Open(f.path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer h.Close()
	// Stat the handle actually read: the name may have been swapped since the stat above.
	if fi, err = h.Stat(); err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(h, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("token file %s: over %d bytes", f.path, maxTokenFileBytes)
	}
	tok := strings.TrimSpace(string(b))
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", f.path, err)
	}
	f.fi, f.tok, f.read = fi, tok, time.Now()
	return tok, nil
}

// checkToken refuses what cannot be a bearer token (RFC 6750 §2.1 b64token, the token68 of RFC
// 9110): a clear error here instead of a header Go refuses to send or a server refuses to read.
func checkToken(tok string) error {
	switch {
	case tok == "":
		return errors.New("empty bearer token")
	case len(tok) > MaxTokenBytes:
		return fmt.Errorf("bearer token over %d bytes", MaxTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if !isToken68(tok[i]) && (tok[i] != '=' || i == 0) {
			return errors.New("bearer token has characters outside token68 (a stray newline or quote?)")
		}
	}
	return nil
}

func isToken68(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
}

// UnauthorizedError is a 401 from the endpoint (or a 403 carrying a Bearer challenge, RFC 6750
// §3.1 insufficient_scope): the request needs a (different) bearer token. ResourceMetadata is
// where the server's Protected Resource Metadata document (RFC 9728) is, which names the
// authorization servers that issue tokens for it.
type UnauthorizedError struct {
	Status int
	// ResourceMetadata is the resource_metadata parameter of the Bearer challenge, when it is
	// an absolute http(s) URL.
	ResourceMetadata string
	// Code and Description are the Bearer challenge's error and error_description (RFC 6750
	// §3): "invalid_token", "invalid_request", "insufficient_scope", or empty when no token was
	// sent. Scope is its scope parameter.
	Code, Description, Scope string
	// Challenges are every challenge of WWW-Authenticate, parsed. ParseErr says why they could
	// not be (then Challenges is empty).
	Challenges []Challenge
	ParseErr   error
}

// Error names the metadata URL, so that whoever reads it knows where to get a token.
func (e *UnauthorizedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s: the server wants a bearer token", e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s", e.Code)
		if e.Description != "" {
			fmt.Fprintf(&b, ": %q", e.Description)
		}
		b.WriteString(")")
	}
	if e.Scope != "" {
		fmt.Fprintf(&b, " with scope %q", e.Scope)
	}
	if e.ResourceMetadata != "" {
		fmt.Fprintf(&b, "; how to get one: %s", e.ResourceMetadata)
	} else {
		b.WriteString("; it names no resource metadata URL")
	}
	if e.ParseErr != nil {
		fmt.Fprintf(&b, " (WWW-Authenticate unreadable: %v)", e.ParseErr)
	}
	return b.String()
}

// unauthorized reads the refusal of resp (a 401, or a 403 with a Bearer challenge); nil for any
// other answer.
func unauthorized(resp *http.Response) *UnauthorizedError {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	e := &UnauthorizedError{Status: resp.StatusCode}
	e.Challenges, e.ParseErr = ParseChallenges(resp.Header.Values("WWW-Authenticate"))
	var bearer *Challenge
	for i := range e.Challenges {
		if e.Challenges[i].Scheme == "bearer" {
			bearer = &e.Challenges[i]
			break
		}
	}
	if bearer == nil {
		if resp.StatusCode == http.StatusForbidden {
			return nil // a refusal that is not about the token (a session of another caller, say)
		}
		return e
	}
	p := bearer.Params
	if u, err := url.Parse(p["resource_metadata"]); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		e.ResourceMetadata = u.String()
	}
	e.Code, e.Description, e.Scope = clip(p["error"]), clip(p["error_description"]), clip(p["scope"])
	return e
}

func clip(s string) string {
	if len(s) > maxErrorTextBytes {
		return s[:maxErrorTextBytes] + "..."
	}
	return s
}

// Challenge is one challenge of a WWW-Authenticate field (RFC 9110 §11.6.1): a scheme with
// either parameters or a token68.
type Challenge struct {
	// Scheme is lower-cased ("bearer"); parameter names too.
	Scheme  string
	Params  map[string]string
	Token68 string
}

// ParseChallenges parses WWW-Authenticate field values (RFC 9110 §11.6.1, §5.6: lists, tokens,
// quoted strings with quoted-pairs; RFC 6750 §3 for Bearer). It is strict: a value that does
// not follow the grammar, repeats a parameter within a challenge (which would make its meaning
// ambiguous), holds a control character, or exceeds maxChallengeBytes, maxChallenges or
// maxChallengeParams yields no challenges and an error. It runs in time linear in its input.
func ParseChallenges(values []string) ([]Challenge, error) {
	n := 0
	for _, v := range values {
		n += len(v) + 2
	}
	if n > maxChallengeBytes {
		return nil, fmt.Errorf("over %d bytes", maxChallengeBytes)
	}
	// Several fields are one list (RFC 9110 §5.3).
	p := &challengeParser{s: strings.Join(values, ", ")}
	cs, err := p.parse()
	if err != nil {
		return nil, err
	}
	return cs, nil
}

// challengeParser is a recursive-descent parser over one WWW-Authenticate list; i is the
// position. Every loop consumes input or stops, and lookahead reads at most one token and the
// whitespace around it, so parsing is linear.
type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) parse() ([]Challenge, error) {
	var out []Challenge
	for {
		p.skipListSeparators()
		if p.i == len(p.s) {
			return out, nil
		}
		if len(out) == maxChallenges {
			return nil, fmt.Errorf("more than %d challenges", maxChallenges)
		}
		c, err := p.challenge()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// skipListSeparators skips OWS and empty list elements: *( OWS "," ) OWS.
func (p *challengeParser) skipListSeparators() {
	for p.i < len(p.s) && (p.s[p.i] == ',' || isOWS(p.s[p.i])) {
		p.i++
	}
}

func (p *challengeParser) challenge() (Challenge, error) {
	scheme := p.token()
	if scheme == "" {
		return Challenge{}, fmt.Errorf("at byte %d: expected an auth-scheme", p.i)
	}
	c := Challenge{Scheme: strings.ToLower(scheme)}
	// auth-scheme [ 1*SP ( token68 / #auth-param ) ]
	if p.i == len(p.s) || p.s[p.i] == ',' {
		return c, nil
	}
	if p.s[p.i] != ' ' {
		return Challenge{}, fmt.Errorf("at byte %d: expected a space after the scheme %q", p.i, scheme)
	}
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	if p.i == len(p.s) || p.s[p.i] == ',' {
		return c, nil
	}
	if p.paramAhead() {
		c.Params = map[string]string{}
		for {
			name := strings.ToLower(p.token())
			p.skipOWS()
			p.i++ // "=", checked by paramAhead
			p.skipOWS()
			var val string
			var err error
			if p.i < len(p.s) && p.s[p.i] == '"' {
				if val, err = p.quoted(); err != nil {
					return Challenge{}, err
				}
			} else if val = p.token(); val == "" {
				return Challenge{}, fmt.Errorf("at byte %d: parameter %q has no value", p.i, name)
			}
			if _, dup := c.Params[name]; dup {
				return Challenge{}, fmt.Errorf("parameter %q repeated in the %s challenge", name, c.Scheme)
			}
			if len(c.Params) == maxChallengeParams {
				return Challenge{}, fmt.Errorf("more than %d parameters in the %s challenge", maxChallengeParams, c.Scheme)
			}
			c.Params[name] = val
			// After a parameter: the end, or a list separator followed by another parameter
			// of this challenge, or by the next challenge.
			p.skipOWS()
			if p.i == len(p.s) {
				return c, nil
			}
			if p.s[p.i] != ',' {
				return Challenge{}, fmt.Errorf("at byte %d: expected \",\" after parameter %q", p.i, name)
			}
			p.skipListSeparators()
			if p.i == len(p.s) || !p.paramAhead() {
				return c, nil // the next challenge (or nothing) starts here
			}
		}
	}
	// token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
	start := p.i
	for p.i < len(p.s) && isToken68(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		return Challenge{}, fmt.Errorf("at byte %d: expected a token68 or parameters after the scheme %q", p.i, scheme)
	}
	for p.i < len(p.s) && p.s[p.i] == '=' {
		p.i++
	}
	c.Token68 = p.s[start:p.i]
	p.skipOWS()
	if p.i < len(p.s) && p.s[p.i] != ',' {
		return Challenge{}, fmt.Errorf("at byte %d: expected \",\" after the token68 of %q", p.i, scheme)
	}
	return c, nil
}

// paramAhead says whether an auth-param starts here: token BWS "=" and then not another "="
// (which would make it a token68 such as "abc==").
func (p *challengeParser) paramAhead() bool {
	j := p.i
	for j < len(p.s) && isTchar(p.s[j]) {
		j++
	}
	if j == p.i {
		return false
	}
	for j < len(p.s) && isOWS(p.s[j]) {
		j++
	}
	if j == len(p.s) || p.s[j] != '=' {
		return false
	}
	j++
	for j < len(p.s) && isOWS(p.s[j]) {
		j++
	}
	return j < len(p.s) && p.s[j] != '=' && p.s[j] != ','
}

func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *challengeParser) skipOWS() {
	for p.i < len(p.s) && isOWS(p.s[p.i]) {
		p.i++
	}
}

// quoted reads a quoted-string (RFC 9110 §5.6.4) starting at its opening quote: qdtext is HTAB,
// SP and visible or obs-text octets; a quoted-pair escapes one such octet. Control characters
// are refused: the values end up in error messages and terminals.
func (p *challengeParser) quoted() (string, error) {
	start := p.i
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c == '\\':
			if p.i+1 == len(p.s) || !isQdtextOrQuote(p.s[p.i+1]) {
				return "", fmt.Errorf("at byte %d: bad quoted-pair", p.i)
			}
			b.WriteByte(p.s[p.i+1])
			p.i += 2
		case isQdtextOrQuote(c):
			b.WriteByte(c)
			p.i++
		default:
			return "", fmt.Errorf("at byte %d: control character in a quoted string", p.i)
		}
	}
	return "", fmt.Errorf("at byte %d: unterminated quoted string", start)
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// isTchar: RFC 9110 §5.6.2 tchar.
func isTchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isQdtextOrQuote: HTAB, SP, VCHAR, obs-text (what a quoted-pair may escape; qdtext plus the
// quote and backslash themselves).
func isQdtextOrQuote(c byte) bool { return c == '\t' || c >= 0x20 && c != 0x7f }

// AuthorizationEndedError is how a server ended a listen stream because the caller's
// authorization ended (the draft "Authorization lifetime for subscription streams"): its
// JSON-RPC error carries data.reason, for example "token_expiry", "insufficient_authorization"
// or "revoked". The client reports it as the Err of an EventDropped and then reconnects, asking
// its TokenSource (or Options.Credential) again: a source that yields a fresh token listens on;
// one that does not gets an UnauthorizedError per attempt (EventReconnect's Err) until it does.
type AuthorizationEndedError struct {
	Reason  string
	Code    int64
	Message string
}

// Error says why the stream ended.
func (e *AuthorizationEndedError) Error() string {
	return fmt.Sprintf("the server ended the listen stream: authorization ended (%s): %s", e.Reason, e.Message)
}

// Reasons a server gives in AuthorizationEndedError.Reason.
const (
	ReasonTokenExpiry               = "token_expiry"
	ReasonInsufficientAuthorization = "insufficient_authorization"
	ReasonRevoked                   = "revoked"
)

// authorizationEnded returns the AuthorizationEndedError a listen-ending JSON-RPC error is, or
// nil: any error whose data is an object with a non-empty string reason (the draft's error code
// is not settled; its data.reason is).
func authorizationEnded(e *rpcError) *AuthorizationEndedError {
	if e == nil || len(e.Data) == 0 {
		return nil
	}
	var data struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(e.Data, &data) != nil || data.Reason == "" {
		return nil
	}
	return &AuthorizationEndedError{Reason: clip(data.Reason), Code: e.Code, Message: clip(e.Message)}
}
