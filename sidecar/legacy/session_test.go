package legacy

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSessionIDs(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	now := time.Unix(1_800_000_000, 0)
	c := newSessionCodec(key, "ns/srv-catalog", time.Hour)
	c.now = func() time.Time { return now }
	caps := json.RawMessage(`{"roots":{"listChanged":true}}`)
	id, err := c.mint("2025-06-18", caps, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			t.Fatalf("session id has byte %#x: not a visible ASCII header value", id[i])
		}
	}
	sess, err := c.open(id)
	if err != nil || sess.version != "2025-06-18" || string(sess.caps) != string(caps) || !sess.expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("open(mint) = %+v, %v", sess, err)
	}
	if id2, _ := c.mint("2025-06-18", caps, ""); id2 == id {
		t.Error("two sessions got the same id")
	}

	// Another replica with the same key and server honours it.
	other := newSessionCodec(append([]byte(nil), key...), "ns/srv-catalog", time.Minute)
	other.now = c.now
	if _, err := other.open(id); err != nil {
		t.Errorf("a replica sharing the key refused the id: %v", err)
	}

	prefix, rest, _ := strings.Cut(id, ".")
	p64, m64, _ := strings.Cut(rest, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(p64)
	forgedPayload := strings.Replace(string(payload), `"2025-06-18"`, `"2025-11-25"`, 1)
	longer := strings.Replace(string(payload), `"e":`, `"e":9`, 1)
	refused := map[string]string{
		"empty":              "",
		"not ours":           "0123456789abcdef",
		"payload edited":     prefix + "." + base64.RawURLEncoding.EncodeToString([]byte(forgedPayload)) + "." + m64,
		"expiry extended":    prefix + "." + base64.RawURLEncoding.EncodeToString([]byte(longer)) + "." + m64,
		"mac edited":         prefix + "." + p64 + "." + otherFirstChar(m64),
		"mac missing":        prefix + "." + p64,
		"padding":            id + "=",
		"oversized":          id + strings.Repeat("A", maxSessionIDBytes),
		"other prefix":       "s2." + rest,
		"another key":        mustMint(t, newSessionCodec([]byte(strings.Repeat("x", 32)), "ns/srv-catalog", time.Hour)),
		"another server":     mustMint(t, newSessionCodec(key, "ns/other-catalog", time.Hour)),
		"a 2026 revision id": mustMintVersion(t, c, "2026-07-28"),
	}
	for name, bad := range refused {
		if _, err := c.open(bad); err == nil {
			t.Errorf("%s: open accepted %q", name, bad)
		}
	}

	// Expiry: valid until the instant it expires.
	now = now.Add(time.Hour - time.Second)
	if _, err := c.open(id); err != nil {
		t.Errorf("a second before expiry: %v", err)
	}
	now = now.Add(time.Second)
	if _, err := c.open(id); !errors.Is(err, errSessionExpired) {
		t.Errorf("at expiry: %v, want errSessionExpired", err)
	}

	if _, err := c.mint("2025-11-25", json.RawMessage(`{"x":"`+strings.Repeat("a", maxSessionCapsBytes)+`"}`), ""); err == nil {
		t.Error("minted a session with capabilities over the bound")
	}
}

func mustMint(t *testing.T, c *sessionCodec) string {
	t.Helper()
	return mustMintVersion(t, c, "2025-11-25")
}

func mustMintVersion(t *testing.T, c *sessionCodec, v string) string {
	t.Helper()
	id, err := c.mint(v, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// otherFirstChar returns s with its first character replaced by another
// base64url character, so the decoded MAC always differs.
func otherFirstChar(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// BenchmarkSessionOpen is the per-request cost of a 2025-era session id:
// the first request of a session verifies it (HMAC, decode), later ones hit
// the cache.
func BenchmarkSessionOpen(b *testing.B) {
	c := newSessionCodec([]byte(strings.Repeat("k", 32)), "ns/srv-catalog", time.Hour)
	id, err := c.mint("2025-11-25", json.RawMessage(`{"roots":{"listChanged":true},"sampling":{}}`), "")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("verify", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.verify(id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.open(id); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestInputIDsUnpredictable (F11): the id of a request the sidecar sends a 2025-era client
// (elicitation/create…) is the handle its answer is delivered by; it must not be derivable from
// the event prefix every priming event id shows plus a sequence number.
func TestInputIDsUnpredictable(t *testing.T) {
	sess := &Session{key: "k"}
	a, b := newClientCalls(), newClientCalls()
	ida, _, _ := a.expect(sess, "p-")
	idb, _, _ := b.expect(sess, "p-")
	if ida == `"`+inputIDPrefix+"p-1"+`"` || ida == idb {
		t.Fatalf("input ids %s and %s: predictable", ida, idb)
	}
	if !strings.HasPrefix(ida, `"`+inputIDPrefix+"p-") {
		t.Fatalf("input id %s lost the replica's prefix (late answers are recognised by it)", ida)
	}
}
