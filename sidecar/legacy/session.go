package legacy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
)

// 2025-era sessions are self-contained: the Mcp-Session-Id the sidecar
// mints on initialize carries the negotiated revision, the client's
// capabilities and an expiry, signed with HMAC-SHA256 under a key every
// replica of the same MCPServer shares (the controller keeps it in a
// Secret). Any replica honours any replica's session, so a Service without
// session affinity just works; nothing is stored anywhere.
//
//	id = "s1." + base64url(payload) + "." + base64url(HMAC-SHA256(key, "switchboard-session/1\n" + payload))
//	payload = {"s": server, "v": version, "c": clientCapabilities, "e": expiry (unix s), "n": nonce, "u": subject binding}
//
// With authentication on, "u" binds the session to the caller that opened it (CallerBinding: its
// issuer and subject, hashed). An id presented by another caller (or without a verified caller)
// is refused like an id the server never issued. Sessions opened
// without a verified caller have no "u" (ids minted before binding existed verify unchanged).

// Session limits.
const (
	// DefaultSessionTTL is how long a 2025-era session id is honoured.
	DefaultSessionTTL = 24 * time.Hour
	// maxSessionCapsBytes bounds the client capabilities a session id
	// carries (they travel in a header on every request).
	maxSessionCapsBytes = 4 << 10
	// maxSessionIDBytes bounds an Mcp-Session-Id the sidecar will verify.
	maxSessionIDBytes = 8 << 10
	// sessionKeyBytes is the size of a generated key.
	sessionKeyBytes = 32
	// maxSessionStates bounds the sessions this replica keeps local state
	// for (subscriptions, log level, open GET streams).
	maxSessionStates = 100000
)

const sessionPrefix = "s1."

// SessionKeyEnv is the environment variable that may carry the session key
// (from the MCPServer's session Secret, through secretKeyRef).
const SessionKeyEnv = "SWITCHBOARD_SESSION_KEY"

// MinSessionKeyBytes is the shortest session key accepted.
const MinSessionKeyBytes = 32

var (
	errSessionInvalid = errors.New("session id not issued by this server")
	errSessionExpired = errors.New("session expired")
	errSessionEnded   = errors.New("session ended (DELETE)")
)

// sessionCodec mints and verifies session ids.
type sessionCodec struct {
	key    []byte
	server string
	ttl    time.Duration
	now    func() time.Time

	// verified caches ids that verified (a request of a session needs no
	// second HMAC and decode); bounded by maxVerifiedSessions, emptied when
	// full. Guarded by mu.
	mu       sync.Mutex
	verified map[string]*Session
}

// maxVerifiedSessions bounds the cache of verified session ids.
const maxVerifiedSessions = 1024

func newSessionCodec(key []byte, server string, ttl time.Duration) *sessionCodec {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessionCodec{key: key, server: server, ttl: ttl, now: time.Now, verified: map[string]*Session{}}
}

// NewSessionKey returns a random session key (for a sidecar started without
// one: its sessions are then honoured by itself only).
func NewSessionKey() []byte {
	k := make([]byte, sessionKeyBytes)
	_, _ = rand.Read(k)
	return k
}

// Session is a verified 2025-era session.
type Session struct {
	id string
	// key names the session in this replica's local state: its nonce
	// (unique, and far shorter than the id).
	key     string
	version string
	caps    json.RawMessage
	// upCaps are the capabilities its translated requests declare
	// (upstreamCaps, computed once).
	upCaps  json.RawMessage
	expires time.Time
	// subject is the caller binding ("u"; "" when opened without a verified caller).
	subject string
}

// Version is the 2025-era revision the session negotiated.
func (s *Session) Version() string { return s.version }

// UpstreamCaps are the client capabilities its translated requests declare.
func (s *Session) UpstreamCaps() json.RawMessage { return s.upCaps }

type sessionPayload struct {
	Server  string          `json:"s"`
	Version string          `json:"v"`
	Caps    json.RawMessage `json:"c"`
	Expires int64           `json:"e"`
	Nonce   string          `json:"n"`
	Subject string          `json:"u,omitempty"`
}

// CallerBinding is the "u" of a session opened by the verified caller id ("" for none): a hash
// of its issuer and subject, each length-prefixed (two issuers that map a user to the same name
// do not share sessions). A hash: the id travels in a header and logs, the caller's name need
// not.
func CallerBinding(id *authn.Identity) string {
	if id == nil {
		return ""
	}
	b := make([]byte, 0, 32+len(id.Issuer)+len(id.Subject))
	b = append(b, "switchboard-subject/1\n"...)
	b = binary.AppendUvarint(b, uint64(len(id.Issuer)))
	b = append(b, id.Issuer...)
	b = binary.AppendUvarint(b, uint64(len(id.Subject)))
	b = append(b, id.Subject...)
	h := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// boundTo reports whether the session may be used with binding (CallerBinding of the request's
// caller).
func (s *Session) boundTo(binding string) bool {
	return hmac.Equal([]byte(s.subject), []byte(binding))
}

func (c *sessionCodec) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("switchboard-session/1\n"))
	m.Write(payload)
	return m.Sum(nil)
}

// mint returns a new session id, bound to binding (CallerBinding of the verified caller).
func (c *sessionCodec) mint(version string, caps json.RawMessage, binding string) (string, error) {
	if len(caps) == 0 || string(caps) == "null" {
		caps = json.RawMessage(`{}`)
	}
	if len(caps) > maxSessionCapsBytes {
		return "", errors.New("client capabilities exceed 4096 bytes")
	}
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	payload, err := json.Marshal(sessionPayload{Server: c.server, Version: version, Caps: caps,
		Expires: c.now().Add(c.ttl).Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce), Subject: binding})
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return sessionPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(c.mac(payload)), nil
}

// open verifies a session id: signed with this key, for this server, not
// expired.
func (c *sessionCodec) open(id string) (*Session, error) {
	c.mu.Lock()
	sess := c.verified[id]
	c.mu.Unlock()
	if sess != nil {
		if !c.now().Before(sess.expires) {
			return nil, errSessionExpired
		}
		return sess, nil
	}
	sess, err := c.verify(id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.verified) >= maxVerifiedSessions {
		clear(c.verified)
	}
	c.verified[id] = sess
	c.mu.Unlock()
	return sess, nil
}

// verify checks a session id's signature, server and expiry.
func (c *sessionCodec) verify(id string) (*Session, error) {
	if len(id) > maxSessionIDBytes {
		return nil, errSessionInvalid
	}
	rest, ok := strings.CutPrefix(id, sessionPrefix)
	if !ok {
		return nil, errSessionInvalid
	}
	p64, m64, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, errSessionInvalid
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	mac, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, c.mac(payload)) {
		return nil, errSessionInvalid
	}
	var p sessionPayload
	if json.Unmarshal(payload, &p) != nil || p.Server != c.server || !IsVersion(p.Version) {
		return nil, errSessionInvalid
	}
	exp := time.Unix(p.Expires, 0)
	if !c.now().Before(exp) {
		return nil, errSessionExpired
	}
	return &Session{id: id, key: p.Nonce, version: p.Version, caps: p.Caps, upCaps: upstreamCaps(p.Caps), expires: exp, subject: p.Subject}, nil
}

// sessionState is what this replica keeps about a session: its resource
// subscriptions, its log level and its open GET streams. It is local: a
// subscribe that lands on another replica is held there (docs/sidecar.md).
type sessionState struct {
	expires time.Time
	level   string
	uris    map[string]bool // nil until the first subscribe
	bytes   int64           // subscriptionBytes of uris, taken from the replica's budget
	streams []*hub.Stream   // its open GET streams here (usually one)
}

// sessionStates is the local state of the sessions seen on this replica,
// keyed by session id. Guarded by mu; bounded by maxSessionStates (expired
// entries are dropped first).
type sessionStates struct {
	mu sync.Mutex
	m  map[string]*sessionState
	// ended are the sessions DELETEd on this replica, until they expire.
	ended map[string]time.Time
	// release gives the subscriptions of a dropped session back to the replica's budget
	// (Hub.giveSubscriptions).
	release func(n int, b int64)
}

func newSessionStates(release func(n int, b int64)) *sessionStates {
	return &sessionStates{m: map[string]*sessionState{}, ended: map[string]time.Time{}, release: release}
}

// dropLocked forgets a session's state and gives its subscriptions back.
func (ss *sessionStates) dropLocked(key string) *sessionState {
	st := ss.m[key]
	if st != nil {
		delete(ss.m, key)
		ss.release(len(st.uris), st.bytes)
	}
	return st
}

// purgeLocked drops the expired sessions with no stream open here, keep aside (the state a
// request is working on), and reports whether it dropped any.
func (ss *sessionStates) purgeLocked(keep *sessionState) bool {
	now := time.Now()
	purged := false
	for id, s := range ss.m {
		if s != keep && !now.Before(s.expires) && len(s.streams) == 0 {
			ss.dropLocked(id)
			purged = true
		}
	}
	return purged
}

// end records that a session was deleted here (bounded: expired entries are
// dropped first, and past the bound the oldest knowledge is lost).
func (ss *sessionStates) endLocked(sess *Session) {
	if len(ss.ended) >= maxSessionStates {
		now := time.Now()
		for id, exp := range ss.ended {
			if !now.Before(exp) {
				delete(ss.ended, id)
			}
		}
		if len(ss.ended) >= maxSessionStates {
			return
		}
	}
	ss.ended[sess.key] = sess.expires
}

// isEnded reports whether the session was deleted on this replica.
func (ss *sessionStates) isEnded(id string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.ended[id]
	return ok
}

// get returns the state of sess, creating it; nil when the table is full of
// live sessions.
func (ss *sessionStates) getLocked(sess *Session) *sessionState {
	st := ss.m[sess.key]
	if st != nil {
		return st
	}
	if len(ss.m) >= maxSessionStates {
		ss.purgeLocked(nil)
		if len(ss.m) >= maxSessionStates {
			return nil
		}
	}
	st = &sessionState{expires: sess.expires}
	ss.m[sess.key] = st
	return st
}

// level returns the log level the session set on this replica ("" when none).
func (ss *sessionStates) level(id string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if st := ss.m[id]; st != nil {
		return st.level
	}
	return ""
}
