// Package kubectlmcp is `kubectl mcp`, a kubectl plugin (cmd/kubectl-mcp) that shows what an MCP
// client of a Switchboard server sees, built on package client:
//
//	kubectl mcp tools|prompts|resources SERVER   what a client lists, with TTL and scope, and
//	                                             which entries MCPTool/MCPPrompt/MCPResource declare
//	kubectl mcp watch SERVER                     every listen event: notifications, complete,
//	                                             re-listen, reconnect, re-baseline
//	kubectl mcp call SERVER TOOL --args JSON     calls a tool
//
// SERVER is an MCPServer; the plugin port-forwards to one of its ready pods (the sidecar's MCP
// port). --url talks to any MCP endpoint directly instead. --token, --token-file or --as-sa
// (a ServiceAccount token minted for the server's audience) say who is asking.
package kubectlmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-mcp/switchboard/client"
)

const usage = `kubectl mcp: what an MCP client of a Switchboard server sees.

Usage:
  kubectl mcp tools SERVER [flags]       tools a client lists, with TTL, scope and where each comes from
  kubectl mcp prompts SERVER [flags]     prompts, likewise
  kubectl mcp resources SERVER [flags]   resources and resource templates, likewise
  kubectl mcp watch SERVER [flags]       print every notification, complete, re-listen and reconnect
  kubectl mcp call SERVER TOOL --args JSON [flags]
                                         call a tool and print its result

SERVER is an MCPServer in the namespace (-n); the plugin port-forwards to one of its ready pods.
With --url, SERVER is optional (given, it is used to tell declared entries from the server's).

Identity (one of these; a server that authenticates its callers lists what that caller may use):
  --token-file FILE     a bearer token from FILE, re-read when it changes
  --as-sa NS/NAME       act as a ServiceAccount: a 10-minute token for SERVER's audience, minted
                        with the TokenRequest API (what an agent running as it presents)
  --token TOKEN         a bearer token on the command line (visible in ps)
  --authorization-file FILE, --authorization VALUE, $SWITCHBOARD_AUTHORIZATION
                        a whole Authorization header value
The API server's own bearer token (kubectl's --token) is --kube-token here.

Flags:
`

// options are the command line.
type options struct {
	url           string
	output        string
	args          string
	authorization string
	// authorizationFile holds the Authorization value (--authorization-file); AuthorizationEnv is
	// read when no credential flag is given.
	authorizationFile string
	token             string // --token
	tokenFile         string // --token-file
	asSA              string // --as-sa [NAMESPACE/]NAME
	timeout           time.Duration
	maxEvents         int
	loading           *clientcmd.ClientConfigLoadingRules
	overrides         *clientcmd.ConfigOverrides
}

// AuthorizationEnv holds the Authorization value when no credential flag is given, so the
// credential need not be on the command line.
const AuthorizationEnv = "SWITCHBOARD_AUTHORIZATION"

// maxAuthorizationFileBytes bounds --authorization-file.
const maxAuthorizationFileBytes = 64 << 10

// credentialFlags are the flags that say what the MCP requests carry: at most one is given.
var credentialFlags = []string{"authorization", "authorization-file", "token", "token-file", "as-sa"}

// credential is what the MCP requests carry, from the one credential flag given: an
// Authorization value (--authorization, --authorization-file, else $SWITCHBOARD_AUTHORIZATION)
// or a TokenSource (--token, --token-file). --as-sa gives neither here: its token is minted
// once the cluster is known (run).
func credential(o options, fs *pflag.FlagSet) (string, client.TokenSource, error) {
	var given []string
	for _, f := range credentialFlags {
		if fs.Changed(f) {
			given = append(given, "--"+f)
		}
	}
	if len(given) > 1 {
		return "", nil, fmt.Errorf("%s: give one of them", strings.Join(given, " and "))
	}
	switch {
	case fs.Changed("authorization"):
		if o.authorization == "" {
			return "", nil, errors.New("--authorization is empty")
		}
		return o.authorization, nil, nil
	case fs.Changed("token"):
		if o.token == "" {
			return "", nil, errors.New("--token is empty")
		}
		return "", client.StaticToken(o.token), nil
	case fs.Changed("token-file"):
		src := client.TokenFile(o.tokenFile)
		if _, err := src(context.Background()); err != nil { // say so now, not at the first request
			return "", nil, fmt.Errorf("--token-file: %w", err)
		}
		return "", src, nil
	case fs.Changed("as-sa"):
		if _, _, err := parseServiceAccount(o.asSA, "default"); err != nil {
			return "", nil, err
		}
		return "", nil, nil
	case fs.Changed("authorization-file"):
		f, err := os.Open(o.authorizationFile)
		if err != nil {
			return "", nil, fmt.Errorf("--authorization-file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxAuthorizationFileBytes+1))
		if err != nil {
			return "", nil, fmt.Errorf("--authorization-file: %w", err)
		}
		if len(b) > maxAuthorizationFileBytes {
			return "", nil, fmt.Errorf("--authorization-file: over %d bytes", maxAuthorizationFileBytes)
		}
		return strings.TrimRight(string(b), " \t\r\n"), nil, nil
	}
	return os.Getenv(AuthorizationEnv), nil, nil
}

// Run runs the plugin with args (without the program name) and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := options{loading: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	fs := pflag.NewFlagSet("kubectl mcp", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "", "MCP endpoint to talk to directly (no port-forward), e.g. http://127.0.0.1:8800/mcp")
	fs.StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (default: a table; for watch, one line per event)")
	fs.StringVar(&o.args, "args", "{}", "call: the tool's arguments as a JSON object")
	fs.StringVar(&o.authorization, "authorization", "", "Authorization header value sent to the MCP server, e.g. \"Bearer TOKEN\" (visible in ps and shell history: prefer --authorization-file or $"+AuthorizationEnv+")")
	fs.StringVar(&o.authorizationFile, "authorization-file", "", "Read the Authorization header value from this file (trailing whitespace dropped)")
	fs.StringVar(&o.token, "token", "", "Bearer token sent to the MCP server (visible in ps and shell history: prefer --token-file)")
	fs.StringVar(&o.tokenFile, "token-file", "", "Read the bearer token from this file, again whenever it changes (a projected ServiceAccount token)")
	fs.StringVar(&o.asSA, "as-sa", "", "Act as ServiceAccount NAMESPACE/NAME (or NAME in -n): mint its token for the MCPServer's audience with the TokenRequest API (needs SERVER and create on serviceaccounts/token)")
	fs.DurationVar(&o.timeout, "mcp-timeout", 30*time.Second, "Bound on connecting and on each read or call (watch runs until interrupted)")
	fs.IntVar(&o.maxEvents, "max-events", 0, "watch: exit after this many events (0: run until interrupted)")
	fs.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file")
	kube := clientcmd.RecommendedConfigOverrideFlags("")
	// --token is the MCP server's bearer token here (the plugin's subject); the API server's,
	// kubectl's --token, is --kube-token.
	kube.AuthOverrideFlags.Token.LongName = "kube-token"
	clientcmd.BindOverrideFlags(o.overrides, fs, kube)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	cred, tokens, err := credential(o, fs)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		fmt.Fprintf(stderr, "error: --output %q: use json or yaml\n", o.output)
		return 2
	}
	pos := fs.Args()
	if len(pos) == 0 {
		fs.Usage()
		return 2
	}
	verb, rest := pos[0], pos[1:]
	var server, tool string
	switch verb {
	case "tools", "prompts", "resources", "watch":
		switch {
		case len(rest) == 1:
			server = rest[0]
		case len(rest) == 0 && o.url != "":
		default:
			fmt.Fprintf(stderr, "error: kubectl mcp %s takes one SERVER (or --url)\n", verb)
			return 2
		}
	case "call":
		switch {
		case len(rest) == 2:
			server, tool = rest[0], rest[1]
		case len(rest) == 1 && o.url != "":
			tool = rest[0]
		default:
			fmt.Fprintln(stderr, "error: kubectl mcp call takes SERVER TOOL (or --url and TOOL)")
			return 2
		}
	default:
		fmt.Fprintf(stderr, "error: unknown command %q\n", verb)
		fs.Usage()
		return 2
	}
	if o.asSA != "" && server == "" {
		fmt.Fprintln(stderr, "error: --as-sa needs SERVER: the token's audience is the MCPServer's")
		return 2
	}
	if err := run(ctx, o, verb, server, tool, cred, tokens, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		var ue *client.UnauthorizedError
		if errors.As(err, &ue) && cred == "" && tokens == nil && o.asSA == "" {
			fmt.Fprintln(stderr, "hint: the server authenticates its callers: give a token with --token-file FILE, or --as-sa NAMESPACE/NAME to act as a ServiceAccount")
		}
		return 1
	}
	return 0
}

func run(ctx context.Context, o options, verb, server, tool, cred string, tokens client.TokenSource, stdout, stderr io.Writer) error {
	t, err := target(ctx, o, server, stderr)
	if err != nil {
		return err
	}
	defer t.close()
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	as := ""
	if o.asSA != "" {
		ns, name, err := parseServiceAccount(o.asSA, t.namespace)
		if err != nil {
			return err
		}
		if t.cfg == nil {
			return errors.New("--as-sa needs the cluster (a kubeconfig)")
		}
		m, err := newMinter(cctx, t.cfg, ns, name, t.namespace, server, func(w string) { fmt.Fprintln(stderr, "warning:", w) })
		if err != nil {
			return err
		}
		tokens, as = m.token, "ServiceAccount "+ns+"/"+name
		fmt.Fprintf(stderr, "# as %s (audience %s, a token of %s minted through the TokenRequest API)\n", as, m.audience, tokenExpiration)
	}
	var events chan client.Event
	opts := &client.Options{Credential: cred, Token: tokens, ClientInfo: &mcp.Implementation{Name: "kubectl-mcp", Version: "v1"}}
	if verb == "watch" {
		events = make(chan client.Event, 1024)
		opts.Hooks.OnEvent = func(e client.Event) {
			select {
			case events <- e:
			default: // a printer that cannot keep up loses events rather than the stream
			}
		}
	}
	c, err := client.Connect(cctx, t.url, opts)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", t.describe, err)
	}
	defer func() { _ = c.Close() }()

	switch verb {
	case "tools", "prompts", "resources":
		l, err := listing(cctx, c, verb)
		if err != nil {
			return err
		}
		l.Server, l.Namespace, l.Endpoint, l.Via, l.As = server, t.namespace, t.url, t.describe, as
		if server != "" {
			d, err := declared(cctx, t, server)
			if err != nil {
				fmt.Fprintf(stderr, "warning: cannot tell declared entries from the server's: %v\n", err)
				l.markUnknown()
			} else {
				l.mark(d)
			}
		}
		return printListing(stdout, o.output, l)
	case "watch":
		return watch(ctx, stdout, o, c, events, t.describe)
	case "call":
		return call(cctx, stdout, o, c, tool)
	}
	return nil
}

// Listing is what `kubectl mcp tools|prompts|resources` prints.
type Listing struct {
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Endpoint  string `json:"endpoint"`
	Via       string `json:"via"`
	// As is the identity the lists were read as, when the plugin minted it (--as-sa): the lists
	// hold what that identity may use.
	As              string `json:"as,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
	Lists           []List `json:"lists"`
}

// List is one list a client reads, with the cache hints it came with.
type List struct {
	Kind string `json:"kind"`
	// TTLMs is the server's ttlMs; -1 when a 2025-11-25 server announces changes instead.
	TTLMs      int64   `json:"ttlMs"`
	CacheScope string  `json:"cacheScope"`
	Items      []Entry `json:"items"`
}

// Entry is one tool, prompt, resource or resource template.
type Entry struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Source is "declared" (an MCPTool, MCPPrompt or MCPResource names it), "server" (the MCP
	// server lists it and no object declares it), or "unknown" (the cluster could not be read).
	Source     string `json:"source,omitempty"`
	DeclaredBy string `json:"declaredBy,omitempty"`
}

func listOf(kind string, info client.Info, items []Entry) List {
	l := List{Kind: kind, TTLMs: info.TTL.Milliseconds(), CacheScope: string(info.Scope), Items: items}
	if info.UntilChanged {
		l.TTLMs = -1
	}
	if l.CacheScope == "" {
		l.CacheScope = string(client.ScopePrivate)
	}
	return l
}

func listing(ctx context.Context, c *client.Client, verb string) (*Listing, error) {
	l := &Listing{ProtocolVersion: c.ProtocolVersion()}
	switch verb {
	case "tools":
		tools, info, err := c.ListTools(ctx)
		if err != nil {
			return nil, err
		}
		var items []Entry
		for _, t := range tools {
			items = append(items, Entry{Name: t.Name, Title: t.Title, Description: t.Description})
		}
		l.Lists = append(l.Lists, listOf("tools", info, items))
	case "prompts":
		prompts, info, err := c.ListPrompts(ctx)
		if err != nil {
			return nil, err
		}
		var items []Entry
		for _, p := range prompts {
			items = append(items, Entry{Name: p.Name, Title: p.Title, Description: p.Description})
		}
		l.Lists = append(l.Lists, listOf("prompts", info, items))
	case "resources":
		res, info, err := c.ListResources(ctx)
		if err != nil {
			return nil, err
		}
		var items []Entry
		for _, r := range res {
			items = append(items, Entry{Name: r.URI, Title: firstOf(r.Title, r.Name), Description: r.Description})
		}
		l.Lists = append(l.Lists, listOf("resources", info, items))
		tpl, info, err := c.ListResourceTemplates(ctx)
		if err != nil {
			return nil, err
		}
		items = nil
		for _, r := range tpl {
			items = append(items, Entry{Name: r.URITemplate, Title: firstOf(r.Title, r.Name), Description: r.Description})
		}
		l.Lists = append(l.Lists, listOf("resourceTemplates", info, items))
	}
	return l, nil
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// mark sets Source from the declared names: kind → client-visible name → object.
func (l *Listing) mark(d map[string]map[string]string) {
	for i := range l.Lists {
		for j := range l.Lists[i].Items {
			e := &l.Lists[i].Items[j]
			if by, ok := d[l.Lists[i].Kind][e.Name]; ok {
				e.Source, e.DeclaredBy = "declared", by
			} else {
				e.Source = "server"
			}
		}
	}
}

func (l *Listing) markUnknown() {
	for i := range l.Lists {
		for j := range l.Lists[i].Items {
			l.Lists[i].Items[j].Source = "unknown"
		}
	}
}

func printListing(w io.Writer, format string, l *Listing) error {
	if format != "" {
		return encode(w, format, l)
	}
	for i, list := range l.Lists {
		if i > 0 {
			fmt.Fprintln(w)
		}
		ttl := "ttl " + (time.Duration(list.TTLMs) * time.Millisecond).String()
		if list.TTLMs < 0 {
			ttl = "cached until the server announces a change"
		}
		as := ""
		if l.As != "" {
			as = ", as " + l.As
		}
		fmt.Fprintf(w, "# %s: %d, %s, scope %s (protocol %s, via %s%s)\n", list.Kind, len(list.Items), ttl, list.CacheScope, l.ProtocolVersion, l.Via, as)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION")
		for _, e := range list.Items {
			src := e.Source
			if e.DeclaredBy != "" {
				src = e.DeclaredBy
			}
			if src == "" {
				src = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, src, oneLine(e.Description, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}

func encode(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WatchEvent is one line of `kubectl mcp watch -o json`.
type WatchEvent struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Method  string    `json:"method,omitempty"`
	URI     string    `json:"uri,omitempty"`
	Filter  any       `json:"filter,omitempty"`
	Error   string    `json:"error,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	DelayMs int64     `json:"delayMs,omitempty"`
	// AuthorizedUntil (acknowledged) is when the server will end the stream because the token
	// ends, if it says.
	AuthorizedUntil *time.Time `json:"authorizedUntil,omitempty"`
}

func watch(ctx context.Context, w io.Writer, o options, c *client.Client, events chan client.Event, via string) error {
	if o.output == "" {
		fmt.Fprintf(w, "# watching %s at %s; Ctrl-C stops\n", via, c.ProtocolVersion())
	}
	for n := 0; o.maxEvents == 0 || n < o.maxEvents; n++ {
		var e client.Event
		select {
		case e = <-events:
		case <-ctx.Done():
			return nil
		}
		we := WatchEvent{Time: e.Time.UTC(), Type: string(e.Type), Method: e.Method, URI: e.URI, Attempt: e.Attempt, DelayMs: e.Delay.Milliseconds()}
		if e.Filter != nil {
			we.Filter = e.Filter
		}
		if !e.AuthorizedUntil.IsZero() {
			u := e.AuthorizedUntil.UTC()
			we.AuthorizedUntil = &u
		}
		if e.Err != nil {
			we.Error = e.Err.Error()
		}
		var err error
		switch o.output {
		case "json":
			var b []byte
			if b, err = json.Marshal(we); err == nil {
				_, err = fmt.Fprintf(w, "%s\n", b)
			}
		case "yaml":
			if _, err = fmt.Fprintln(w, "---"); err == nil {
				err = encode(w, "yaml", we)
			}
		default:
			_, err = fmt.Fprintln(w, watchLine(we))
		}
		if err != nil {
			return err
		}
		if f, ok := w.(*os.File); ok {
			_ = f.Sync()
		}
	}
	return nil
}

func watchLine(e WatchEvent) string {
	parts := []string{e.Time.Format(time.RFC3339Nano), e.Type}
	switch client.EventType(e.Type) {
	case client.EventAcknowledged:
		if e.Filter != nil {
			b, _ := json.Marshal(e.Filter)
			parts = append(parts, string(b))
		}
		if e.AuthorizedUntil != nil {
			parts = append(parts, "authorized until "+e.AuthorizedUntil.Format(time.RFC3339))
		}
	case client.EventNotification:
		parts = append(parts, e.Method)
		if e.URI != "" {
			parts = append(parts, e.URI)
		}
	case client.EventRelisten:
		parts = append(parts, fmt.Sprintf("in %dms", e.DelayMs))
	case client.EventReconnect:
		parts = append(parts, fmt.Sprintf("attempt %d in %dms", e.Attempt, e.DelayMs))
	}
	if e.Error != "" {
		parts = append(parts, "("+e.Error+")")
	}
	return strings.Join(parts, "  ")
}

func call(ctx context.Context, w io.Writer, o options, c *client.Client, tool string) error {
	var args map[string]any
	if err := json.Unmarshal([]byte(o.args), &args); err != nil {
		return fmt.Errorf("--args must be a JSON object: %w", err)
	}
	res, err := c.CallTool(ctx, tool, args)
	if err != nil {
		return err
	}
	if o.output != "" {
		if err := encode(w, o.output, res); err != nil {
			return err
		}
	} else {
		for _, ct := range res.Content {
			if t, ok := ct.(*mcp.TextContent); ok {
				fmt.Fprintln(w, t.Text)
				continue
			}
			b, _ := json.Marshal(ct)
			fmt.Fprintf(w, "%s\n", b)
		}
		if res.StructuredContent != nil && len(res.Content) == 0 {
			b, _ := json.Marshal(res.StructuredContent)
			fmt.Fprintf(w, "%s\n", b)
		}
	}
	if res.IsError {
		return fmt.Errorf("the tool %s reported an error", tool)
	}
	return nil
}
