//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// exportedMetrics gathers a registry: metric family name -> type.
func exportedMetrics(t *testing.T, g prometheus.Gatherer, into map[string]dto.MetricType) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		into[mf.GetName()] = mf.GetType()
	}
}

// scrapedMetrics reads a running process's /metrics: metric family name -> type.
func scrapedMetrics(t *testing.T, url string, into map[string]dto.MetricType) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for name, mf := range mfs {
		into[name] = mf.GetType()
	}
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promNumber   = regexp.MustCompile(`\b[0-9][0-9.]*(?:[eE][-+]?[0-9]+)?[a-zA-Z]*`) // numbers and durations
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	labelValues  = regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)

// metricNames returns the metric names a PromQL expression selects: identifiers that are not
// functions, aggregations, keywords, label names of matchers or groupings, or range durations.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promNumber.ReplaceAllString(expr, " ")
	expr = promRanges.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || slices.Contains(promKeywords, m[0]) {
			continue // a function or an aggregation, or a keyword
		}
		names = append(names, m[0])
	}
	return names
}

func TestMetricNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, method) (rate(a_bucket{x=~"$y", z="w"}[$__rate_interval])))`: {"a_bucket"},
		`sum(b) / on (pod) group_left c{d="e{f}"} offset 5m`:                                               {"b", "c"},
		`label_values(d{namespace=~"$namespace"}, mcp_server)`:                                             {"d"},
		`max by (pod) (e) and bool 1`:                                                                      {"e"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}

// TestChartDashboard renders the chart with the dashboard and the PodMonitor on, and checks
// that the dashboard ConfigMap carries Grafana's sidecar label, that it has the panels the
// on-call engineer looks for, and that every query (panels and template variables) names at
// least one metric and only metrics the code exports: what the stack's real sidecar serves on
// its admin port's /metrics (its own registry) and the manager's registry (controller-runtime's,
// filled by the stack's running manager).
func TestChartDashboard(t *testing.T) {
	objs, _ := render(t, "metrics.dashboard.enabled=true", "metrics.podMonitor.enabled=true")
	cm := find(objs, "ConfigMap", "switchboard-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap lacks the grafana_dashboard label: %v", cm.GetLabels())
	}
	pm := find(objs, "PodMonitor", "switchboard-sidecars")
	if pm == nil {
		t.Fatal("no PodMonitor")
	}
	if raw, _ := json.Marshal(pm.Object["spec"]); !strings.Contains(string(raw), `"targetLabel":"mcp_server"`) {
		t.Errorf("the PodMonitor must set mcp_server, which the dashboard selects on: %s", raw)
	}
	if off, _ := render(t); find(off, "ConfigMap", "switchboard-dashboard") != nil || find(off, "PodMonitor", "") != nil {
		t.Error("the dashboard and the PodMonitor are opt-in")
	}

	data, _, _ := unstructured.NestedString(cm.Object, "data", "switchboard.json")
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}

	exported := map[string]dto.MetricType{}
	// The stack's sidecar process (its registry, served on the admin port, with a catalog
	// applied) and its manager, running in this process (controller-runtime's registry).
	scrapedMetrics(t, stack.AdminURL+"/metrics", exported)
	exportedMetrics(t, ctrlmetrics.Registry, exported)
	check := func(where, expr string) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		for _, n := range names {
			if _, ok := exported[n]; ok {
				continue
			}
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if typ, ok := exported[base]; ok && base != n && typ == dto.MetricType_HISTOGRAM {
				continue
			}
			t.Errorf("%s: %s is not a metric the code exports", where, n)
		}
	}
	var titles []string
	for _, p := range dash.Panels {
		titles = append(titles, p.Title)
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			check(fmt.Sprintf("panel %q query %d", p.Title, i), tg.Expr)
			if p.Title != "Reconciles by controller" && p.Title != "Reconcile errors by controller" &&
				!strings.Contains(tg.Expr, `mcp_server=~"$server"`) {
				t.Errorf("panel %q query %d is not per server: %s", p.Title, i, tg.Expr)
			}
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		expr, _ := q["query"].(string)
		check("variable "+v.Name, expr)
	}
	for _, want := range []string{"Listen streams", "Notifications by type", "Fan-out latency", "Upstream latency by method (p99)",
		"Errors by code", "Catalog revision per replica", "Drains", "Reconciles by controller", "Reconcile errors by controller"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q among %v", want, titles)
		}
	}
}
