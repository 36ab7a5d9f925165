package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kagzi/kagzi/internal/telemetry"
)

// observabilityServices are compose services no Kagzi service may wait
// for: the engine runs whether or not they do.
var observabilityServices = []string{"jaeger", "prometheus", "grafana"}

// TestComposeObservabilityOptional: no Kagzi service depends on Jaeger,
// Prometheus or Grafana, so a failing one stops nothing.
func TestComposeObservabilityOptional(t *testing.T) {
	p := loadCompose(t, nil)
	for name := range kagziServices {
		for dep := range service(t, p, name).DependsOn {
			if slices.Contains(observabilityServices, dep) {
				t.Errorf("%s depends on %s: the engine must start without it", name, dep)
			}
		}
	}
}

// TestComposeResourceLimits: every service has CPU and memory limits.
func TestComposeResourceLimits(t *testing.T) {
	p := loadCompose(t, nil)
	for _, s := range p.Services {
		if s.Deploy == nil || s.Deploy.Resources.Limits == nil ||
			s.Deploy.Resources.Limits.NanoCPUs <= 0 || s.Deploy.Resources.Limits.MemoryBytes <= 0 {
			t.Errorf("%s: no CPU and memory limits (deploy.resources.limits)", s.Name)
		}
	}
}

// mountOf returns the host path mounted at target in service s.
func mountOf(t *testing.T, name, target string) string {
	t.Helper()
	for _, v := range service(t, loadCompose(t, nil), name).Volumes {
		if v.Target == target {
			if _, err := os.Stat(v.Source); err != nil {
				t.Fatalf("%s: %s is mounted from %s: %v", name, target, v.Source, err)
			}
			return v.Source
		}
	}
	t.Fatalf("%s: nothing mounted at %s", name, target)
	return ""
}

type promConfig struct {
	Global        map[string]string `json:"global"`
	RuleFiles     []string          `json:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		StaticConfigs []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `json:"names"`
			Type  string   `json:"type"`
			Port  int      `json:"port"`
		} `json:"dns_sd_configs"`
	} `json:"scrape_configs"`
}

type promRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestComposePrometheus: Prometheus scrapes every replica of every Kagzi
// service on its health port, and loads the alert rules.
func TestComposePrometheus(t *testing.T) {
	p := loadCompose(t, nil)
	prom := service(t, p, "prometheus")
	var cfg promConfig
	readYAML(t, mountOf(t, "prometheus", "/etc/prometheus/prometheus.yml"), &cfg)
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, d := range sc.DNSSDConfigs {
			if d.Type == "A" && d.Port == 8080 {
				for _, n := range d.Names {
					scraped[n] = true
				}
			}
		}
	}
	for name := range kagziServices {
		if name != "migrate" && !scraped[name] {
			t.Errorf("prometheus does not scrape every %s replica on :8080 (DNS A records)", name)
		}
	}
	mounted := mountOf(t, "prometheus", "/etc/prometheus/alerts.yml")
	if !slices.Contains(cfg.RuleFiles, "/etc/prometheus/alerts.yml") {
		t.Errorf("prometheus loads rule files %v, not the mounted alerts.yml", cfg.RuleFiles)
	}
	if !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus command %v does not read the mounted config", prom.Command)
	}
	var rules promRules
	readYAML(t, mounted, &rules)
	alerts := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r.Expr
			checkMetricNames(t, "alert "+r.Alert, r.Expr)
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity", r.Alert)
			}
		}
	}
	for alert, metric := range map[string]string{
		"KagziNoRelayLeader":      "kagzi_relay_leader",
		"KagziOldestDueRunTooOld": "kagzi_queue_oldest_due_age_seconds",
		"KagziWorkersOffline":     "kagzi_workers_online",
		"KagziDeadLettersGrowing": "kagzi_runs_failed_total",
	} {
		if !strings.Contains(alerts[alert], metric) {
			t.Errorf("alert %s: expr %q, want one on %s", alert, alerts[alert], metric)
		}
	}
	if !published(prom, 9090) {
		t.Errorf("prometheus: port 9090 not published")
	}
}

// published reports whether s publishes container port on the host.
func published(s types.ServiceConfig, port uint32) bool {
	return slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool {
		return pc.Target == port && pc.Published != ""
	})
}

var metricRE = regexp.MustCompile(`\b(kagzi_[a-z_]+)`)

// checkMetricNames fails for a kagzi_ metric that no service serves.
func checkMetricNames(t *testing.T, where, expr string) {
	t.Helper()
	for _, m := range metricRE.FindAllString(expr, -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if !slices.Contains(telemetry.MetricNames, base) {
			t.Errorf("%s uses %s, which no Kagzi service serves (telemetry.MetricNames)", where, m)
		}
	}
}

type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard: Grafana is provisioned with Prometheus and Jaeger
// and the Kagzi dashboard, whose panels query metrics the services serve,
// covering the ones an operator watches.
func TestGrafanaDashboard(t *testing.T) {
	p := loadCompose(t, nil)
	g := service(t, p, "grafana")
	prov := mountOf(t, "grafana", "/etc/grafana/provisioning")
	dir := mountOf(t, "grafana", "/var/lib/grafana/dashboards")
	var ds struct {
		Datasources []struct {
			UID  string `json:"uid"`
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"datasources"`
	}
	b, err := os.ReadFile(filepath.Join(prov, "datasources", "datasources.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, d := range ds.Datasources {
		sources[d.UID] = d.Type + " " + d.URL
	}
	if sources["prometheus"] != "prometheus http://prometheus:9090" || sources["jaeger"] != "jaeger http://jaeger:16686" {
		t.Errorf("grafana data sources %v, want prometheus and jaeger on the compose network", sources)
	}
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	b, err = os.ReadFile(filepath.Join(prov, "dashboards", "dashboards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &provider); err != nil || len(provider.Providers) != 1 ||
		provider.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider %+v %v, want one reading /var/lib/grafana/dashboards", provider, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "kagzi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("kagzi.json: %v", err)
	}
	if d.UID != "kagzi" || d.Title != "Kagzi" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	used := map[string]bool{}
	for _, pn := range d.Panels {
		if pn.Type == "row" {
			continue
		}
		if pn.Datasource == nil || pn.Datasource.UID != "prometheus" || len(pn.Targets) == 0 {
			t.Errorf("panel %q: no Prometheus query", pn.Title)
		}
		for _, tg := range pn.Targets {
			checkMetricNames(t, "panel "+pn.Title, tg.Expr)
			for _, m := range metricRE.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(m, "_bucket")] = true
			}
			if strings.Contains(tg.Expr, "process_") || strings.Contains(tg.Expr, "go_") {
				used["runtime"] = true
			}
		}
	}
	for _, want := range []string{
		"kagzi_queue_depth", "kagzi_queue_oldest_due_age_seconds", "kagzi_runs_started_total", "kagzi_runs_completed_total",
		"kagzi_runs_failed_total", "kagzi_executions_total", "kagzi_step_duration_milliseconds", "kagzi_report_latency_milliseconds",
		"kagzi_claim_latency_milliseconds", "kagzi_leases_lost_total", "kagzi_runs_recovered_total", "kagzi_workers_online",
		"kagzi_relay_leader", "kagzi_notifications_relayed_total", "kagzi_schedule_fires_total",
		"kagzi_schedule_lateness_milliseconds", "kagzi_schedule_skipped_total", "runtime",
	} {
		if !used[want] {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
	if !published(g, 3000) {
		t.Errorf("grafana: port 3000 not published")
	}
}

// TestK8sTelemetry: the base sends every Kagzi process's traces to an
// in-namespace OpenTelemetry collector: ConfigMap kagzi names its Service's
// OTLP/HTTP port, the Service selects the collector's pods, which expose
// that port, and the collector's configuration receives OTLP on it and has
// a traces pipeline.
func TestK8sTelemetry(t *testing.T) {
	for _, tr := range loadAll(t) {
		cm, _ := tr.find("ConfigMap", "kagzi").(*corev1.ConfigMap)
		if cm == nil {
			t.Fatalf("%s: no ConfigMap kagzi", tr.Dir)
		}
		ep := cm.Data["OTEL_EXPORTER_OTLP_ENDPOINT"]
		if ep != "http://otel-collector:4318" || cm.Data["OTEL_EXPORTER_OTLP_PROTOCOL"] != "http/protobuf" {
			t.Errorf("%s: ConfigMap kagzi OTEL endpoint %q protocol %q, want the collector's OTLP/HTTP",
				tr.Dir, ep, cm.Data["OTEL_EXPORTER_OTLP_PROTOCOL"])
		}
		for name := range kagziDeployments {
			d, _ := tr.find("Deployment", name).(*appsv1.Deployment)
			if d == nil {
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
				return e.ConfigMapRef != nil && e.ConfigMapRef.Name == "kagzi"
			}) {
				t.Errorf("%s: Deployment %s does not load ConfigMap kagzi (the OTEL_* settings)", tr.Dir, name)
			}
		}
		svc, _ := tr.find("Service", "otel-collector").(*corev1.Service)
		dep, _ := tr.find("Deployment", "otel-collector").(*appsv1.Deployment)
		conf, _ := tr.find("ConfigMap", "otel-collector").(*corev1.ConfigMap)
		if svc == nil || dep == nil || conf == nil {
			t.Fatalf("%s: Service %v, Deployment %v, ConfigMap %v otel-collector: want all three", tr.Dir, svc != nil, dep != nil, conf != nil)
		}
		if !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, dep.Spec.Template.Labels) {
			t.Errorf("%s: Service otel-collector does not select the collector's pods", tr.Dir)
		}
		for _, port := range []int32{4317, 4318} {
			ok := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
				return p.Port == port && p.TargetPort.IntValue() == int(port)
			})
			if !ok || !hasPort(&dep.Spec.Template.Spec, intstr.FromInt32(port)) {
				t.Errorf("%s: OTLP port %d not served by Service and pods", tr.Dir, port)
			}
		}
		var cfg struct {
			Receivers struct {
				OTLP struct {
					Protocols map[string]struct {
						Endpoint string `json:"endpoint"`
					} `json:"protocols"`
				} `json:"otlp"`
			} `json:"receivers"`
			Service struct {
				Pipelines map[string]struct {
					Receivers []string `json:"receivers"`
					Exporters []string `json:"exporters"`
				} `json:"pipelines"`
			} `json:"service"`
		}
		if err := yaml.Unmarshal([]byte(conf.Data["collector.yaml"]), &cfg); err != nil {
			t.Fatalf("%s: collector.yaml: %v", tr.Dir, err)
		}
		if cfg.Receivers.OTLP.Protocols["http"].Endpoint != "0.0.0.0:4318" || cfg.Receivers.OTLP.Protocols["grpc"].Endpoint != "0.0.0.0:4317" {
			t.Errorf("%s: collector OTLP receivers %+v, want gRPC 4317 and HTTP 4318 on every interface", tr.Dir, cfg.Receivers.OTLP)
		}
		tp := cfg.Service.Pipelines["traces"]
		if !slices.Contains(tp.Receivers, "otlp") || len(tp.Exporters) == 0 {
			t.Errorf("%s: collector traces pipeline %+v, want otlp in and an exporter out", tr.Dir, tp)
		}
		if !slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == "otel-collector"
		}) {
			t.Errorf("%s: the collector does not mount ConfigMap otel-collector", tr.Dir)
		}
	}
}

// TestK8sStartupProbes: every Kagzi service has a startup probe on /readyz,
// which answers only once every component of the process has started.
func TestK8sStartupProbes(t *testing.T) {
	for _, tr := range loadAll(t) {
		for name := range kagziDeployments {
			d, _ := tr.find("Deployment", name).(*appsv1.Deployment)
			if d == nil {
				t.Errorf("%s: no Deployment %s", tr.Dir, name)
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			if c.StartupProbe == nil {
				t.Errorf("%s: Deployment %s has no startup probe", tr.Dir, name)
				continue
			}
			checkHTTPProbe(t, tr.Dir+": "+name+" startup", c.StartupProbe, "/readyz")
			if budget := c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold; budget < 60 {
				t.Errorf("%s: %s startup probe gives %ds to start, want at least 60", tr.Dir, name, budget)
			}
		}
	}
}
