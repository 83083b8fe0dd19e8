package controllers

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// verdict is the Accepted decision for one MCPTool, MCPResource or MCPPrompt.
type verdict struct {
	Accepted bool
	Reason   mcpv1alpha1.ConditionReason
	Message  string
}

// items are the catalog objects that reference one server.
type items struct {
	Tools     []mcpv1alpha1.MCPTool
	Resources []mcpv1alpha1.MCPResource
	Prompts   []mcpv1alpha1.MCPPrompt
}

// resolution is what resolve decided: the accepted objects and a verdict per object.
type resolution struct {
	accepted items
	// verdicts of every object not being deleted.
	verdicts map[itemKey]verdict
}

// itemKey names a catalog item among those of every kind: its Go type (the kind) and its name.
type itemKey struct {
	kind reflect.Type
	name string
}

func keyOf(o mcpv1alpha1.CatalogItem) itemKey {
	return itemKey{kind: reflect.TypeOf(o), name: o.GetName()}
}

// resolve decides which objects are accepted on the server. Objects are invalid when their spec
// fails a check the API server cannot make (undeclared prompt placeholders). Among the valid
// objects of one kind exposing the same name (for resources: the same URI or URI template), the
// oldest wins, then the one whose object name sorts first; the others get NameConflict naming
// the winner.
func resolve(in items) resolution {
	res := resolution{verdicts: map[itemKey]verdict{}}
	res.accepted.Tools = pick(res.verdicts, in.Tools, nil)
	res.accepted.Resources = pick(res.verdicts, in.Resources, nil)
	res.accepted.Prompts = pick(res.verdicts, in.Prompts,
		func(p *mcpv1alpha1.MCPPrompt) string {
			if undeclared := p.Spec.UndeclaredPlaceholders(); len(undeclared) > 0 {
				return fmt.Sprintf("messages use placeholders that spec.arguments does not declare: %s; declare them or fix the messages",
					strings.Join(undeclared, ", "))
			}
			return ""
		})
	return res
}

// pick is resolve for one kind: it records the verdict of each object and returns the accepted
// ones. invalid returns why an object cannot be accepted, or "".
func pick[T any, PT interface {
	*T
	mcpv1alpha1.CatalogItem
}](verdicts map[itemKey]verdict, objs []T, invalid func(PT) string) []T {
	kind := reflect.TypeFor[T]().Name()
	sorted := make([]PT, 0, len(objs))
	for i := range objs {
		o := PT(&objs[i])
		if o.GetDeletionTimestamp() != nil {
			continue
		}
		if invalid != nil {
			if why := invalid(o); why != "" {
				verdicts[keyOf(o)] = verdict{Reason: mcpv1alpha1.ReasonInvalidSpec, Message: why}
				continue
			}
		}
		sorted = append(sorted, o)
	}
	slices.SortFunc(sorted, func(a, b PT) int {
		if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	winners := map[string]string{}
	var accepted []T
	for _, o := range sorted {
		k := o.GetExposedName()
		if w, taken := winners[k]; taken {
			verdicts[keyOf(o)] = verdict{Reason: mcpv1alpha1.ReasonNameConflict,
				Message: fmt.Sprintf("%s %q already exposes %q on this server (older objects win, then object names in order); rename one of them", kind, w, k)}
			continue
		}
		winners[k] = o.GetName()
		verdicts[keyOf(o)] = verdict{Accepted: true, Reason: mcpv1alpha1.ReasonAccepted, Message: fmt.Sprintf("exposed as %q", k)}
		accepted = append(accepted, *o)
	}
	return accepted
}

// catalogFor compiles the catalog of a server from its accepted objects. It is pure: the same
// server spec and objects always give the same document, and so the same revision.
func catalogFor(s *mcpv1alpha1.MCPServer, accepted items) *catalog.Catalog {
	var caching mcpv1alpha1.CachingSpec
	if s.Spec.Caching != nil {
		caching = *s.Spec.Caching
	}
	c := &catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{
			Namespace:  s.Namespace,
			Name:       s.Name,
			ToolPolicy: string(cmp.Or(s.Spec.ToolPolicy, mcpv1alpha1.ToolPolicyAll)),
			Caching: catalog.CacheDefaults{
				Discover:          cacheHint(caching.Discover),
				Tools:             cacheHint(caching.Tools),
				Prompts:           cacheHint(caching.Prompts),
				Resources:         cacheHint(caching.Resources),
				ResourceTemplates: cacheHint(caching.ResourceTemplates),
				ResourceRead:      cacheHint(caching.ResourceRead),
			},
		},
		Tools:     []catalog.Tool{},
		Resources: []catalog.Resource{},
		Prompts:   []catalog.Prompt{},
	}
	for _, t := range accepted.Tools {
		c.Tools = append(c.Tools, toolEntry(&t))
	}
	for _, r := range accepted.Resources {
		e := resourceEntry(&r)
		if e.Source.Secret != nil && e.Cache == nil {
			// A Secret's content is never public, whatever the server's default says (the
			// MCPResource's CEL checks only its own caching): the server's TTL, Private.
			h := c.Server.Caching.ResourceRead
			h.CacheScope = catalog.ScopePrivate
			e.Cache = &h
		}
		c.Resources = append(c.Resources, e)
	}
	for _, p := range accepted.Prompts {
		c.Prompts = append(c.Prompts, promptEntry(&p))
	}
	pinCatalog(c, s, accepted.Tools)
	c.Sort()
	return c
}

// cacheHint converts an API hint to the wire form; unset means the API default, 0 s Private.
func cacheHint(h *mcpv1alpha1.CacheHint) catalog.CacheHint {
	out := catalog.CacheHint{CacheScope: catalog.ScopePrivate}
	if h == nil {
		return out
	}
	out.TTLMs = int64(ptr.Deref(h.TTLSeconds, 0)) * 1000
	if h.Scope == mcpv1alpha1.CacheScopePublic {
		out.CacheScope = catalog.ScopePublic
	}
	return out
}

func toolEntry(t *mcpv1alpha1.MCPTool) catalog.Tool {
	out := catalog.Tool{
		Name:         t.Spec.Name,
		UpstreamName: t.Spec.UpstreamName,
		Title:        t.Spec.Title,
		Description:  t.Spec.Description,
		Disabled:     t.Spec.State == mcpv1alpha1.ToolDisabled,
	}
	if out.UpstreamName == out.Name {
		out.UpstreamName = ""
	}
	if t.Spec.InputSchema != nil {
		out.InputSchema = t.Spec.InputSchema.Raw()
	}
	if t.Spec.OutputSchema != nil {
		out.OutputSchema = t.Spec.OutputSchema.Raw()
	}
	if a := t.Spec.Annotations; a != nil {
		out.Annotations = &catalog.ToolAnnotations{
			ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint,
		}
	}
	return out
}

func resourceEntry(r *mcpv1alpha1.MCPResource) catalog.Resource {
	out := catalog.Resource{
		URI: r.Spec.URI, URITemplate: r.Spec.URITemplate, Name: r.Spec.Name, Title: r.Spec.Title,
		Description: r.Spec.Description, MimeType: r.Spec.MimeType,
	}
	src := r.Spec.Source
	switch {
	case src.Upstream != nil:
		out.Source.Upstream = true
	case src.Inline != nil:
		out.Source.Inline = &catalog.Inline{Text: src.Inline.Text}
	case src.ConfigMapKeyRef != nil:
		out.Source.ConfigMap = &catalog.KeyRef{Name: src.ConfigMapKeyRef.Name, Key: src.ConfigMapKeyRef.Key}
	case src.SecretKeyRef != nil:
		out.Source.Secret = &catalog.KeyRef{Name: src.SecretKeyRef.Name, Key: src.SecretKeyRef.Key}
	}
	if r.Spec.Caching != nil {
		h := cacheHint(r.Spec.Caching)
		if out.Source.Secret != nil {
			h.CacheScope = catalog.ScopePrivate // the CEL already refuses Public; this holds without it
		}
		out.Cache = &h
	}
	return out
}

func promptEntry(p *mcpv1alpha1.MCPPrompt) catalog.Prompt {
	out := catalog.Prompt{Name: p.Spec.Name, Title: p.Spec.Title, Description: p.Spec.Description}
	for _, a := range p.Spec.Arguments {
		out.Arguments = append(out.Arguments, catalog.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
	}
	for _, m := range p.Spec.Messages {
		out.Messages = append(out.Messages, catalog.PromptMessage{Role: string(m.Role), Text: m.Text})
	}
	return out
}
