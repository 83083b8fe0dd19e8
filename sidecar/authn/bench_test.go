package authn

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// benchLatencies runs verify b.N times and reports the p50 and p99 of one call.
func benchLatencies(b *testing.B, verify func()) {
	b.ReportAllocs()
	d := make([]time.Duration, 0, 1024)
	for b.Loop() {
		t0 := time.Now()
		verify()
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkVerifyCached is a token already verified: the cost every call of a caller pays.
func BenchmarkVerifyCached(b *testing.B) {
	a := New(Options{})
	a.Configure(authWith(opIssuer(b)))
	tok := opToken(b, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "alice", Claims: map[string]any{"groups": []string{"dev", "ops"}}})
	ctx := verifyCtx(b)
	if _, err := a.Verify(ctx, tok); err != nil {
		b.Fatal(err)
	}
	benchLatencies(b, func() {
		if _, err := a.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkVerifyFirstUseOIDC is a token of the real OP seen for the first time, with the
// issuer discovered and its JWKS warm: signature (RS256), claims, mapping, caching.
func BenchmarkVerifyFirstUseOIDC(b *testing.B) {
	a := New(Options{})
	a.Configure(authWith(opIssuer(b)))
	tok := opToken(b, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "alice", Claims: map[string]any{"groups": []string{"dev", "ops"}}})
	ctx := verifyCtx(b)
	if _, err := a.Verify(ctx, tok); err != nil {
		b.Fatal(err)
	}
	benchLatencies(b, func() {
		a.cache.Clear()
		if _, err := a.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkVerifyFirstUseServiceAccount is a ServiceAccount token seen for the first time: one
// TokenReview against the (envtest) API server over loopback.
func BenchmarkVerifyFirstUseServiceAccount(b *testing.B) {
	cs := clientset(b)
	a := New(Options{TokenReviews: cs.AuthenticationV1().TokenReviews()})
	a.Configure(saAuth())
	tok := saToken(b, cs, "bench", "agent", testAudience)
	ctx := verifyCtx(b)
	benchLatencies(b, func() {
		a.cache.Clear()
		if _, err := a.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	})
}
