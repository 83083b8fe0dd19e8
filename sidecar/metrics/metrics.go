// Package metrics holds the sidecar's Prometheus series, in their own
// registry served on the admin port: what the request path counts, and the
// Observer of each room below it (hub.Observer, overlay.Observer,
// legacy.Observer, upstream.Observer) and of the process (connections, the
// propagation report, the drain).
//
// It knows no HTTP routing and no method table: the method label's values
// are given to New (the method table's, through sidecar.NewMetrics), and
// every name, help text and label is the series' public contract.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Metrics are the sidecar's Prometheus series. They live in their own
// registry, served on the admin port.
type Metrics struct {
	Registry *prometheus.Registry

	listenStreams     prometheus.Gauge
	notificationsSent *prometheus.CounterVec
	fanoutSeconds     prometheus.Histogram
	upstreamSeconds   *prometheus.HistogramVec
	errors            *prometheus.CounterVec
	Inflight          prometheus.Gauge
	relayConnected    prometheus.Gauge

	// subscriptions and subscriptionBytes: what the replica holds (Hub.subCount, subBytes).
	subscriptions        prometheus.Gauge
	subscriptionBytes    prometheus.Gauge
	subscriptionsRefused *prometheus.CounterVec
	// connections on the MCP port (sidecar/app's limitListener), and what the caps refused.
	connections        prometheus.Gauge
	connectionsRefused prometheus.Counter
	RequestsRefused    prometheus.Counter
	AuthRefused        *prometheus.CounterVec
	BodyReadTimeouts   prometheus.Counter
	// AccessDenied: requests the choke point refused on access grounds, by audit reason.
	AccessDenied *prometheus.CounterVec
	// AuditDropped: audit records a full or slow sink dropped (auditing.go).
	AuditDropped prometheus.Counter

	catalogApplied      prometheus.Counter
	catalogRejected     prometheus.Counter
	catalogRejectedNow  prometheus.Gauge
	catalogMissingTools prometheus.Gauge
	// catalogWithheldTools: tools pinning withholds (Enforce).
	catalogWithheldTools prometheus.Gauge
	// PinRefused: tools/call refused because pinning withholds the tool.
	PinRefused prometheus.Counter
	// streamsExpired: listen and GET streams ended because their caller's token expired.
	streamsExpired  prometheus.Counter
	reportFailures  prometheus.Counter
	catalogRevision *prometheus.GaugeVec

	draining          prometheus.Gauge
	drainStreamsEnded prometheus.Counter
	drainSeconds      prometheus.Histogram

	// upstreamBy holds the resolved per-method observers (read-only after
	// New), so the hot path skips the label lookup.
	upstreamBy map[string]prometheus.Observer
}

// New registers the sidecar's series (and the Go/process collectors) in a
// new registry. methodLabels are the values of the upstream duration's
// method label besides "other" (the method table's modern methods).
func New(methodLabels []string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		listenStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_listen_streams",
			Help: "Open subscriptions/listen streams held by the sidecar.",
		}),
		notificationsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sidecar_notifications_sent_total",
			Help: "Notifications written to listen streams, by notification method.",
		}, []string{"type"}),
		fanoutSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_sidecar_fanout_duration_seconds",
			Help:    "Time to write one published change to every listen stream that asked for it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		upstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_sidecar_upstream_request_duration_seconds",
			Help:    "Time from forwarding a request to the upstream until its response headers arrive, by MCP method.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"method"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sidecar_errors_total",
			Help: "JSON-RPC errors the sidecar answered itself, by error code.",
		}, []string{"code"}),
		Inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_inflight_requests",
			Help: "Requests in progress (forwarded, or answered by the sidecar), listen streams aside.",
		}),
		relayConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_upstream_listen_connected",
			Help: "1 while the sidecar's own listen stream to the upstream is established.",
		}),
		subscriptions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_subscriptions",
			Help: "Resource subscriptions held: every listen stream's, 2025-era session's and GET stream's on this replica (--max-subscriptions).",
		}),
		subscriptionBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_subscription_bytes",
			Help: "Bytes of the subscribed URIs held, as JSON strings (--max-subscription-bytes).",
		}),
		subscriptionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sidecar_subscriptions_refused_total",
			Help: "Subscriptions (a listen, a resources/subscribe, a 2025-era GET stream) refused by a bound, by reason: uri (too long), stream, session, replica.",
		}, []string{"reason"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_connections",
			Help: "Connections open on the MCP port, listen streams included (--max-connections).",
		}),
		connectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_connections_refused_total",
			Help: "Connections answered 503 and closed because --max-connections were open.",
		}),
		RequestsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_requests_refused_total",
			Help: "Requests answered 503 because --max-inflight-requests were being served.",
		}),
		AuthRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sidecar_auth_refused_total",
			Help: "Requests answered 401 because the catalog's auth needs a bearer token: reason no_token or invalid_token.",
		}, []string{"reason"}),
		BodyReadTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_body_read_timeouts_total",
			Help: "Requests whose body did not arrive within --body-read-timeout (answered 408, connection closed).",
		}),
		AccessDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_sidecar_access_denied_total",
			Help: "Calls, reads and prompt gets refused as unknown: reason NotGranted (no access policy grants it to the caller), Undeclared (the catalog does not serve it) or Withheld (tool pinning).",
		}, []string{"reason"}),
		AuditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_audit_dropped_total",
			Help: "Audit records dropped because the audit sink was full or slow; the next record written says how many (droppedBefore).",
		}),
		catalogApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_catalog_revisions_applied_total",
			Help: "Catalog revisions applied.",
		}),
		catalogRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_catalog_revisions_rejected_total",
			Help: "Catalog revisions rejected (failed to decode or validate); the last good one kept serving.",
		}),
		catalogRejectedNow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_catalog_rejected",
			Help: "1 while the newest catalog revision seen was rejected.",
		}),
		catalogMissingTools: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_catalog_missing_tools",
			Help: "Declared, enabled tools the upstream does not have (not listed).",
		}),
		catalogWithheldTools: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_catalog_withheld_tools",
			Help: "Tools withheld from clients by tool pinning (toolPinning Enforce): drifted from their pin, or unpinned under toolPolicy All.",
		}),
		PinRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_pin_refused_calls_total",
			Help: "tools/call requests refused because tool pinning withholds the tool (toolPinning Enforce).",
		}),
		streamsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_streams_expired_total",
			Help: "Listen and 2025-era GET streams ended because their caller's token expired (AuthorizationEnded, token_expiry).",
		}),
		reportFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_catalog_report_failures_total",
			Help: "Failed attempts to write the propagation report into the status ConfigMap.",
		}),
		catalogRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_catalog_revision_info",
			Help: "1 for the catalog revision the sidecar serves (one series, labelled with the revision).",
		}, []string{"revision"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_sidecar_draining",
			Help: "1 from the start of the graceful drain until the process exits, or until a replica that was not terminated serves again.",
		}),
		drainStreamsEnded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_sidecar_drain_streams_ended_total",
			Help: "Listen streams the drain ended with their graceful complete result.",
		}),
		drainSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchboard_sidecar_drain_duration_seconds",
			Help:    "How long the graceful drain took, from failing readiness until in-flight requests were done.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 10),
		}),
	}
	m.Registry.MustRegister(m.catalogApplied, m.catalogRejected, m.catalogRejectedNow, m.catalogMissingTools, m.catalogWithheldTools, m.PinRefused, m.streamsExpired, m.reportFailures,
		m.catalogRevision, m.draining, m.drainStreamsEnded, m.drainSeconds)
	m.Registry.MustRegister(m.listenStreams, m.notificationsSent, m.fanoutSeconds,
		m.upstreamSeconds, m.errors, m.Inflight, m.relayConnected,
		m.subscriptions, m.subscriptionBytes, m.subscriptionsRefused,
		m.connections, m.connectionsRefused, m.RequestsRefused, m.BodyReadTimeouts, m.AuthRefused,
		m.AccessDenied, m.AuditDropped,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.upstreamBy = map[string]prometheus.Observer{"other": m.upstreamSeconds.WithLabelValues("other")}
	for _, k := range methodLabels {
		m.upstreamBy[k] = m.upstreamSeconds.WithLabelValues(k)
	}
	// Pre-create the label values so the series exist from the start.
	for _, t := range []string{protocol.NotifToolsListChanged, protocol.NotifPromptsListChanged, protocol.NotifResourcesListChanged, protocol.NotifResourcesUpdated} {
		m.notificationsSent.WithLabelValues(t)
	}
	for _, r := range []string{hub.RefusedURI, hub.RefusedStream, hub.RefusedSession, hub.RefusedReplica} {
		m.subscriptionsRefused.WithLabelValues(r)
	}
	for _, r := range []string{audit.ReasonNotGranted, audit.ReasonUndeclared, audit.ReasonWithheld} {
		m.AccessDenied.WithLabelValues(r)
	}
	for _, c := range []int64{wire.CodeParseError, wire.CodeInvalidRequest, wire.CodeMethodNotFound, wire.CodeInvalidParams, wire.CodeInternalError,
		wire.CodeHeaderMismatch, wire.CodeUnsupportedProtocolVersion} {
		m.errors.WithLabelValues(strconv.FormatInt(c, 10))
	}
	return m
}

// ObserveUpstream records how long the upstream took to answer method's
// headers; a method New was not given counts as "other".
func (m *Metrics) ObserveUpstream(method string, d time.Duration) {
	o, ok := m.upstreamBy[method]
	if !ok {
		o = m.upstreamBy["other"]
	}
	o.Observe(d.Seconds())
}

// Admitted registers the gauge of the POSTs being served (sidecar/inflight's
// count); the first Server of a registry registers it.
func (m *Metrics) Admitted(f func() float64) {
	_ = m.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_sidecar_requests_in_progress",
		Help: "POSTs being served, from their headers on (a body still arriving included), listen streams aside (--max-inflight-requests).",
	}, f))
}

// ConnectionOpened counts a connection the MCP port's cap (sidecar/app) let in.
func (m *Metrics) ConnectionOpened() { m.connections.Inc() }

// ConnectionClosed counts the end of a connection ConnectionOpened counted.
func (m *Metrics) ConnectionClosed() { m.connections.Dec() }

// ConnectionRefused counts a connection answered 503 past the cap.
func (m *Metrics) ConnectionRefused() { m.connectionsRefused.Inc() }

// ReportFailed counts a propagation report write that failed.
func (m *Metrics) ReportFailed() { m.reportFailures.Inc() }

// Draining sets the draining gauge.
func (m *Metrics) Draining(on bool) {
	if on {
		m.draining.Set(1)
	} else {
		m.draining.Set(0)
	}
}

// Drained records one finished drain: the listen streams it ended and how long it took.
func (m *Metrics) Drained(streamsEnded int, d time.Duration) {
	m.drainStreamsEnded.Add(float64(streamsEnded))
	m.drainSeconds.Observe(d.Seconds())
}

// SubscriptionRefused counts a subscription refused by a bound (hub.Refused*; legacy.Observer).
func (m *Metrics) SubscriptionRefused(reason string) {
	m.subscriptionsRefused.WithLabelValues(reason).Inc()
}

// CountError counts a JSON-RPC error the sidecar answered itself.
func (m *Metrics) CountError(code int64) {
	m.errors.WithLabelValues(strconv.FormatInt(code, 10)).Inc()
}

// The hub's Observer (hub.Observer).

// StreamOpened counts a registered listen or GET stream.
func (m *Metrics) StreamOpened() { m.listenStreams.Inc() }

// StreamClosed counts a stream's end.
func (m *Metrics) StreamClosed() { m.listenStreams.Dec() }

// StreamExpired counts a stream ended by its caller's token expiry.
func (m *Metrics) StreamExpired() { m.streamsExpired.Inc() }

// Sent records one fan-out of method to n streams that took d.
func (m *Metrics) Sent(method string, n int, d time.Duration) {
	m.notificationsSent.WithLabelValues(method).Add(float64(n))
	m.fanoutSeconds.Observe(d.Seconds())
}

// Subscriptions sets the subscriptions the replica holds.
func (m *Metrics) Subscriptions(n int, b int64) {
	m.subscriptions.Set(float64(n))
	m.subscriptionBytes.Set(float64(b))
}

// RelayConnected records whether the relay's upstream listen is connected
// (upstream.Observer).
func (m *Metrics) RelayConnected(up bool) {
	if up {
		m.relayConnected.Set(1)
	} else {
		m.relayConnected.Set(0)
	}
}
