package authn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TokenReviewer creates TokenReviews: client-go's AuthenticationV1().TokenReviews().
type TokenReviewer interface {
	Create(ctx context.Context, tr *authv1.TokenReview, opts metav1.CreateOptions) (*authv1.TokenReview, error)
}

// saPrefix starts the username of a ServiceAccount: system:serviceaccount:<ns>:<name>.
const saPrefix = "system:serviceaccount:"

// saVerifier validates this cluster's ServiceAccount tokens with a TokenReview, which checks
// the signature, expiry, audience and that the bound pod and ServiceAccount still exist.
type saVerifier struct {
	reviews     TokenReviewer
	audiences   []string
	trustDomain string
	revalidate  time.Duration
}

func (v *saVerifier) same(o *saVerifier) bool {
	return slices.Equal(v.audiences, o.audiences) && v.trustDomain == o.trustDomain
}

func (v *saVerifier) verify(ctx context.Context, token string, c *peeked) (*Identity, time.Time, error) {
	if v.reviews == nil {
		return nil, time.Time{}, transient{errors.New("no Kubernetes client to review ServiceAccount tokens")}
	}
	res, err := v.reviews.Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token, Audiences: v.audiences}}, metav1.CreateOptions{})
	if err != nil {
		// The API server is down or slow: the caller gets a 401 and may retry.
		return nil, time.Time{}, transient{fmt.Errorf("TokenReview failed: %w", err)}
	}
	st := res.Status
	if !st.Authenticated {
		return nil, time.Time{}, fmt.Errorf("the API server refused the token: %s", st.Error)
	}
	if !slices.ContainsFunc(st.Audiences, func(a string) bool { return slices.Contains(v.audiences, a) }) {
		return nil, time.Time{}, errors.New("the token has none of the accepted audiences")
	}
	ns, name, ok := strings.Cut(strings.TrimPrefix(st.User.Username, saPrefix), ":")
	if !strings.HasPrefix(st.User.Username, saPrefix) || !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return nil, time.Time{}, errors.New("the token is not a ServiceAccount's")
	}
	// The signature is checked now, so its exp can be believed. A token without one is a
	// legacy Secret token, never bound to a pod nor expiring: refused.
	if c.Exp <= 0 {
		return nil, time.Time{}, errors.New("the token has no exp: only projected ServiceAccount tokens are accepted")
	}
	return &Identity{
		Subject:        st.User.Username,
		Groups:         slices.Clone(st.User.Groups),
		ServiceAccount: ns + "/" + name,
		SPIFFE:         "spiffe://" + v.trustDomain + "/ns/" + ns + "/sa/" + name,
		Issuer:         IssuerKubernetes,
		Expiry:         time.Unix(int64(c.Exp), 0),
	}, time.Now().Add(v.revalidate), nil
}
