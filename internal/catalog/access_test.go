package catalog

import (
	"strings"
	"testing"
)

func authSample() *Catalog {
	c := sample()
	c.Auth = &Auth{
		Resource:             "http://srv.ns.svc.cluster.local/mcp",
		TrustDomain:          "cluster.local",
		ServiceAccountTokens: &ServiceAccountTokens{Audiences: []string{"http://srv.ns.svc.cluster.local/mcp"}},
		JWT:                  []JWTIssuer{{URL: "https://issuer.example", Audiences: []string{"srv"}, UsernameClaim: "sub"}},
	}
	c.Auth.UpstreamCredentials = &UpstreamCredentials{Secret: "keys", Header: "X-Api-Key", By: CredentialByServiceAccount,
		Keys: map[string]string{"ns/b": "b", "ns/a": "a"}, DefaultKey: "shared"}
	c.Access = &Access{Rules: []AccessRule{{Policy: "p/0", Source: AccessSource{ServiceAccounts: []string{"ns/agent", "other/*"}}, Tools: []string{"zeta"}}}}
	return c
}

func TestAccessRoundTrips(t *testing.T) {
	b, err := Encode(authSample())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if c.Auth == nil || c.Access == nil || c.Access.Rules[0].Tools[0] != "zeta" || c.Auth.JWT[0].URL != "https://issuer.example" {
		t.Fatalf("lost in the round trip: %s", b)
	}
	if u := c.Auth.UpstreamCredentials; u == nil || u.Keys["ns/a"] != "a" || u.DefaultKey != "shared" || u.Header != "X-Api-Key" {
		t.Fatalf("credentials lost in the round trip: %s", b)
	}
	if want := `"keys":{"ns/a":"a","ns/b":"b"}`; !strings.Contains(string(b), want) {
		t.Fatalf("credential keys not sorted (%s): %s", want, b)
	}
	// A catalog without auth keeps its bytes: no "auth" or "access" member at all.
	plain, _ := Encode(sample())
	if strings.Contains(string(plain), `"auth"`) || strings.Contains(string(plain), `"access"`) {
		t.Fatalf("auth members in a catalog without auth: %s", plain)
	}
}

func TestAccessValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Catalog)
		want   string
	}{
		"no authenticator":                    {func(c *Catalog) { c.Auth.ServiceAccountTokens, c.Auth.JWT = nil, nil }, "accepts no token"},
		"relative resource":                   {func(c *Catalog) { c.Auth.Resource = "/mcp" }, "auth.resource"},
		"http issuer":                         {func(c *Catalog) { c.Auth.JWT[0].URL = "http://issuer.example" }, "not an https URL"},
		"issuer twice":                        {func(c *Catalog) { c.Auth.JWT = append(c.Auth.JWT, c.Auth.JWT[0]) }, "appears twice"},
		"no audiences":                        {func(c *Catalog) { c.Auth.JWT[0].Audiences = nil }, "audiences is empty"},
		"sa audiences":                        {func(c *Catalog) { c.Auth.ServiceAccountTokens.Audiences = nil }, "serviceAccountTokens.audiences"},
		"no username claim":                   {func(c *Catalog) { c.Auth.JWT[0].UsernameClaim = "" }, "usernameClaim"},
		"no trust domain":                     {func(c *Catalog) { c.Auth.TrustDomain = "" }, "trustDomain"},
		"access without auth":                 {func(c *Catalog) { c.Auth = nil }, "access needs auth"},
		"bare sa name":                        {func(c *Catalog) { c.Access.Rules[0].Source.ServiceAccounts = []string{"agent"} }, "not <namespace>/<name>"},
		"bad spiffe":                          {func(c *Catalog) { c.Access.Rules[0].Source.Identities = []string{"ns/agent"} }, "spiffe://"},
		"rule without policy":                 {func(c *Catalog) { c.Access.Rules[0].Policy = "" }, "has no policy"},
		"credentials without a secret":        {func(c *Catalog) { c.Auth.UpstreamCredentials.Secret = "" }, "upstreamCredentials.secret"},
		"credentials into an identity header": {func(c *Catalog) { c.Auth.UpstreamCredentials.Header = "x-switchboard-subject" }, "not a header name"},
		"credentials into a hop header":       {func(c *Catalog) { c.Auth.UpstreamCredentials.Header = "Transfer-Encoding" }, "not a header name"},
		"credentials into a bad name":         {func(c *Catalog) { c.Auth.UpstreamCredentials.Header = "X Api" }, "not a header name"},
		"credentials by group":                {func(c *Catalog) { c.Auth.UpstreamCredentials.By = "Group" }, "by \"Group\""},
		"credentials by claim without one":    {func(c *Catalog) { c.Auth.UpstreamCredentials.By = CredentialByClaim }, "credentialClaim"},
		"credentials without keys": {func(c *Catalog) {
			c.Auth.UpstreamCredentials.Keys, c.Auth.UpstreamCredentials.DefaultKey = nil, ""
		}, "maps no caller"},
	} {
		t.Run(name, func(t *testing.T) {
			c := authSample()
			tc.mutate(c)
			err := Validate(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := Validate(authSample()); err != nil {
		t.Fatalf("valid sample refused: %v", err)
	}
}

func TestContentRefs(t *testing.T) {
	c := &Catalog{Resources: []Resource{
		{Source: Source{Secret: &KeyRef{Name: "b", Key: "k"}}},
		{Source: Source{ConfigMap: &KeyRef{Name: "cm", Key: "k"}}},
		{Source: Source{Secret: &KeyRef{Name: "a", Key: "k"}}},
		{Source: Source{Secret: &KeyRef{Name: "b", Key: "other"}}},
		{Source: Source{Upstream: true}},
	}}
	c.Auth = &Auth{UpstreamCredentials: &UpstreamCredentials{Secret: "keys", Header: "X-Api-Key"}}
	cms, secrets := c.ContentRefs()
	if strings.Join(cms, ",") != "cm" || strings.Join(secrets, ",") != "a,b" {
		t.Errorf("unreadable credentials Secret: ConfigMaps %v, Secrets %v; want [cm], [a b]", cms, secrets)
	}
	c.Auth.UpstreamCredentials.Readable = true
	if _, secrets := c.ContentRefs(); strings.Join(secrets, ",") != "a,b,keys" {
		t.Errorf("readable credentials Secret: Secrets %v, want [a b keys]", secrets)
	}
}
