package authn

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// countingReviews counts the TokenReviews that reach the API server.
type countingReviews struct {
	TokenReviewer
	n atomic.Int64
}

func (c *countingReviews) Create(ctx context.Context, tr *authv1.TokenReview, o metav1.CreateOptions) (*authv1.TokenReview, error) {
	c.n.Add(1)
	return c.TokenReviewer.Create(ctx, tr, o)
}

func clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(kube(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// saToken creates ServiceAccount ns/name (and ns) if needed and returns a TokenRequest token
// of it for audience.
func saToken(t testing.TB, cs kubernetes.Interface, ns, name, audience string) string {
	t.Helper()
	ctx := context.Background()
	_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	_, _ = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func saAuth() *catalog.Auth {
	return &catalog.Auth{Resource: testAudience, ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{testAudience}}, TrustDomain: "cluster.local"}
}

// TestServiceAccountTokens: TokenRequest tokens of two ServiceAccounts, one for this server's
// audience, one for another; garbage never reaches the API server; results are cached and
// one TokenReview serves concurrent first uses.
func TestServiceAccountTokens(t *testing.T) {
	cs := clientset(t)
	reviews := &countingReviews{TokenReviewer: cs.AuthenticationV1().TokenReviews()}
	a := New(Options{TokenReviews: reviews})
	a.Configure(saAuth())

	good := saToken(t, cs, "team-a", "agent-a", testAudience)
	wrongAud := saToken(t, cs, "team-b", "agent-b", "https://other.example/mcp")

	var wg sync.WaitGroup
	ids := make([]*Identity, 8)
	errs := make([]error, 8)
	for i := range ids {
		wg.Go(func() { ids[i], errs[i] = a.Verify(verifyCtx(t), good) })
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	id := ids[0]
	if id.Subject != "system:serviceaccount:team-a:agent-a" || id.ServiceAccount != "team-a/agent-a" ||
		id.SPIFFE != "spiffe://cluster.local/ns/team-a/sa/agent-a" || id.Issuer != IssuerKubernetes ||
		!slices.Contains(id.Groups, "system:serviceaccounts:team-a") ||
		time.Until(id.Expiry) < 9*time.Minute || time.Until(id.Expiry) > 11*time.Minute {
		t.Fatalf("identity %s", fmtID(id))
	}
	if _, err := a.Verify(verifyCtx(t), good); err != nil {
		t.Fatal(err)
	}
	if n := reviews.n.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for 9 uses of one token, want 1", n)
	}

	mustRefuse(t, a, wrongAud, "another audience")
	mustRefuse(t, a, wrongAud, "another audience, again")
	if n := reviews.n.Load(); n != 2 {
		t.Fatalf("%d TokenReviews, want 2: a refused token is remembered", n)
	}
	for _, garbage := range []string{"not-a-jwt", "a.b.c", strings.Repeat("x", MaxTokenBytes+1), good[:len(good)-10]} {
		mustRefuse(t, a, garbage, "garbage")
	}
	if n := reviews.n.Load(); n != 3 {
		t.Fatalf("%d TokenReviews, want 3: only the truncated JWT reaches the API server", n)
	}

	// Without serviceAccountTokens, ServiceAccount tokens are refused.
	b := New(Options{TokenReviews: reviews})
	b.Configure(authWith(catalog.JWTIssuer{URL: "https://issuer.invalid", Audiences: []string{testAudience}, UsernameClaim: "sub"}))
	mustRefuse(t, b, good, "ServiceAccount tokens not accepted")
}

// TestServiceAccountDeleted: a token whose ServiceAccount is deleted is refused once its cached
// review is older than RevalidateAfter.
func TestServiceAccountDeleted(t *testing.T) {
	cs := clientset(t)
	a := New(Options{TokenReviews: cs.AuthenticationV1().TokenReviews(), RevalidateAfter: time.Second})
	a.Configure(saAuth())
	tok := saToken(t, cs, "team-c", "doomed", testAudience)
	if _, err := a.Verify(verifyCtx(t), tok); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ServiceAccounts("team-c").Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the deleted ServiceAccount's token is refused", func() bool {
		_, err := a.Verify(verifyCtx(t), tok)
		return err != nil
	})
	if DefaultRevalidateAfter > 30*time.Second {
		t.Fatalf("DefaultRevalidateAfter %s: a deleted ServiceAccount must be refused within 60 s", DefaultRevalidateAfter)
	}
}

// TestServiceAccountAPIServerDown: an API server that cannot be reached refuses (401), and
// the refusal is not remembered.
func TestServiceAccountAPIServerDown(t *testing.T) {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{TokenReviews: cs.AuthenticationV1().TokenReviews()})
	a.Configure(saAuth())
	tok := saToken(t, clientset(t), "team-d", "agent-d", testAudience)
	if err := mustRefuse(t, a, tok, "API server down"); !isTransient(err) {
		t.Fatalf("%v is not transient", err)
	}
	// No client at all: refused too.
	b := New(Options{})
	b.Configure(saAuth())
	mustRefuse(t, b, tok, "no kube client")
}
