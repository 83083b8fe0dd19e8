package sidecar

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is a request's span, on the tracer of sidecar/tracing (which
// describes what traces record and what they never do): its attributes from
// the request, the name it gets once the request was routed, the error it
// ends with, and the trace context the upstream gets.

// startSpan starts the span of one MCP request; the span's context goes
// into req (for the upstream). Only a sampled span gets its attributes and
// a tracing.RequestWriter, which records the JSON-RPC error the request ends
// with; its Finish ends the span.
func (s *Server) startSpan(w http.ResponseWriter, r *http.Request, req *request) (http.ResponseWriter, *tracing.RequestWriter) {
	ctx, span := s.tr.StartRequest(r.Context(), req.method, req.meta, r.Header)
	if span == nil {
		return w, nil
	}
	req.traceCtx = ctx
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, tracing.AttrMethod.String(req.method), tracing.AttrNetTransport.String("tcp"), tracing.AttrNetProtocol.String("http"))
	if v, ok := strings.CutPrefix(r.Proto, "HTTP/"); ok {
		attrs = append(attrs, tracing.AttrNetProtoVersion.String(v))
	}
	if req.id != nil {
		attrs = append(attrs, tracing.AttrRequestID.String(truncateString(tracing.RawIDString(req.id), tracing.MaxValueBytes)))
	}
	// A tool or prompt name is what the client asked for, not yet routed:
	// Finish records it once the request was served (routed). A URI never
	// names the span; it is recorded redacted.
	tw := tracing.NewRequestWriter(w, span, req.method)
	switch req.method {
	case "tools/call":
		name, _ := paramString(req, "name")
		tw.Target(tracing.AttrToolName, name)
		attrs = append(attrs, tracing.AttrOperation.String("execute_tool"))
	case "prompts/get":
		name, _ := paramString(req, "name")
		tw.Target(tracing.AttrPromptName, name)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		uri, _ := paramString(req, "uri")
		attrs = append(attrs, tracing.AttrResourceURI.String(tracing.RedactURI(uri)))
	}
	switch {
	case req.metaVersion != "":
		attrs = append(attrs, tracing.AttrProtocolVersion.String(req.metaVersion))
	case req.session != nil:
		attrs = append(attrs, tracing.AttrProtocolVersion.String(req.session.Version()))
	default:
		if v := wire.HeaderValue(r.Header, protocol.HeaderProtocolVersion); v != "" {
			attrs = append(attrs, tracing.AttrProtocolVersion.String(v))
		}
	}
	if sid := wire.HeaderValue(r.Header, legacy.HeaderSessionID); sid != "" {
		attrs = append(attrs, tracing.AttrSessionID.String(tracing.SessionIDHash(sid)))
	}
	span.SetAttributes(attrs...)
	return tw, tw
}

// markRouted notes that the request's target is one the catalog routes: it
// may name the span.
func markRouted(w http.ResponseWriter) {
	if tw := tracing.From(w); tw != nil {
		tw.MarkRouted()
	}
}

// injectUpstream gives the upstream request the context of the request's
// (sampled) span, in its headers and in params._meta when the client put a
// traceparent there (tracing.InjectRequest). An unsampled span adds nothing:
// the upstream gets the client's own context, if any, as the client sent it.
func (s *Server) injectUpstream(h http.Header, req *request) {
	if req.traceCtx != nil {
		s.tr.InjectRequest(req.traceCtx, h, req.meta)
	}
}

// truncateString cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncateString(s string, n int) string { return tracing.TruncateString(s, n) }
