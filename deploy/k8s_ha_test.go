package deploy_test

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// cnpgCluster is the part of CloudNativePG's Cluster the HA overlay sets,
// decoded strictly like every other manifest.
type cnpgCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Instances             int    `json:"instances"`
		ImageName             string `json:"imageName"`
		PrimaryUpdateStrategy string `json:"primaryUpdateStrategy"`
		PostgreSQL            struct {
			Synchronous struct {
				Method string `json:"method"`
				Number int    `json:"number"`
			} `json:"synchronous"`
			Parameters map[string]string `json:"parameters"`
		} `json:"postgresql"`
		EnableSuperuserAccess bool `json:"enableSuperuserAccess"`
		SuperuserSecret       struct {
			Name string `json:"name"`
		} `json:"superuserSecret"`
		Bootstrap struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		Storage struct {
			Size string `json:"size"`
		} `json:"storage"`
		Resources corev1.ResourceRequirements `json:"resources"`
		Affinity  struct {
			EnablePodAntiAffinity bool   `json:"enablePodAntiAffinity"`
			TopologyKey           string `json:"topologyKey"`
		} `json:"affinity"`
	} `json:"spec"`
}

// TestK8sHAKustomizeBuild: kustomize itself (kubectl kustomize) builds the
// HA overlay, and what it yields for the settings the overlay patches is
// what this package's loader reads.
func TestK8sHAKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl: the overlay is checked by this package's loader only")
	}
	out, err := exec.Command(kubectl, "kustomize", k8sHAOverlay).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", k8sHAOverlay, err, out)
	}
	built := map[string]map[string]string{}
	kinds := map[string]int{}
	for _, doc := range docSep.Split(string(out), -1) {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		var o struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Data     map[string]string `json:"data"`
			// kustomize keeps a Secret's stringData as written.
			StringData map[string]string `json:"stringData"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		kinds[o.Kind]++
		switch o.Kind {
		case "ConfigMap":
			built["ConfigMap "+o.Metadata.Name] = o.Data
		case "Secret":
			built["Secret "+o.Metadata.Name] = o.StringData
		}
	}
	tr := loadKustomization(t, k8sHAOverlay)
	cm, _ := tr.find("ConfigMap", "kagzi").(*corev1.ConfigMap)
	sec, _ := tr.find("Secret", "kagzi-database").(*corev1.Secret)
	if cm == nil || sec == nil {
		t.Fatal("ha: no ConfigMap kagzi or Secret kagzi-database")
	}
	if !reflect.DeepEqual(built["ConfigMap kagzi"], cm.Data) {
		t.Errorf("kustomize's ConfigMap kagzi %v, the loader's %v", built["ConfigMap kagzi"], cm.Data)
	}
	if !reflect.DeepEqual(built["Secret kagzi-database"], sec.StringData) {
		t.Errorf("kustomize's Secret kagzi-database differs from the loader's")
	}
	// Every object the loader knows, kustomize built (the generated
	// ConfigMap gets a hash suffix, hence by kind).
	want := map[string]int{}
	for _, o := range tr.Objects {
		want[o.Kind]++
	}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kustomize built %v, the loader read %v", kinds, want)
	}
}

// TestK8sHANATS: three NATS pods started in parallel, each a node of one
// cluster whose routes name every pod by its stable name, every Kagzi
// process given all three, the files the same as compose's.
func TestK8sHANATS(t *testing.T) {
	tr := loadKustomization(t, k8sHAOverlay)
	ss, _ := tr.find("StatefulSet", "nats").(*appsv1.StatefulSet)
	if ss == nil {
		t.Fatal("ha: no StatefulSet nats")
	}
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != 3 {
		t.Errorf("ha: nats replicas %s, want 3", ptrString(ss.Spec.Replicas))
	}
	// A node is ready only with a JetStream quorum: ordered start would
	// wait forever for nats-0's readiness.
	if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("ha: nats podManagementPolicy %q, want Parallel", ss.Spec.PodManagementPolicy)
	}
	headless, _ := tr.find("Service", ss.Spec.ServiceName).(*corev1.Service)
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("ha: Service %s is not headless with publishNotReadyAddresses (the nodes route to each other before they are ready)", ss.Spec.ServiceName)
	}
	var pods []string
	for i := range int(*ss.Spec.Replicas) {
		pods = append(pods, ss.Name+"-"+string(rune('0'+i))+"."+headless.Name)
	}
	ps := ss.Spec.Template.Spec
	c := ps.Containers[0]
	for _, p := range []int32{4222, 6222, 8222} {
		if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == p }) {
			t.Errorf("ha: nats does not declare containerPort %d", p)
		}
	}
	if !slices.Equal(c.Command, []string{"sh", natsStartScript}) {
		t.Errorf("ha: nats command %q, want sh %s", c.Command, natsStartScript)
	}
	if !slices.Equal(c.Args, []string{"--config", "/etc/nats/cluster.conf", "--name", "$(POD_NAME)"}) {
		t.Errorf("ha: nats args %q, want --config /etc/nats/cluster.conf --name $(POD_NAME)", c.Args)
	}
	podName := false
	for _, e := range c.Env {
		if e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			podName = true
		}
	}
	if !podName {
		t.Error("ha: nats has no POD_NAME from metadata.name: the server names would not be unique")
	}
	var confMap string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/etc/nats" {
			for _, v := range ps.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					confMap = v.ConfigMap.Name
				}
			}
		}
	}
	cm, _ := tr.find("ConfigMap", confMap).(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("ha: nats: /etc/nats is not a ConfigMap of the overlay")
	}
	for _, f := range []string{"nats.conf", "auth.conf", "start.sh"} {
		b, err := os.ReadFile(filepath.Join("nats", f))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[f] != string(b) {
			t.Errorf("ha: ConfigMap %s's %s differs from deploy/nats/%s; keep the two the same", confMap, f, f)
		}
	}
	dir := t.TempDir()
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "cluster.conf")
	checkNATSConf(t, conf)
	o, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var routed []string
	for _, r := range o.Routes {
		if r.Scheme != "nats-route" || r.Port() != "6222" {
			t.Errorf("ha: cluster.conf route %s, want nats-route://POD:6222", r)
		}
		routed = append(routed, r.Hostname())
	}
	if !slices.Equal(routed, pods) {
		t.Errorf("ha: cluster.conf routes to %v, want every pod %v", routed, pods)
	}
	if o.Cluster.Port != 6222 || o.Cluster.Name == "" {
		t.Errorf("ha: cluster.conf cluster port %d name %q", o.Cluster.Port, o.Cluster.Name)
	}

	// Every Kagzi service gets all three nodes (the migrate Job uses no
	// NATS).
	for _, w := range workloads(tr) {
		for _, c := range w.Spec.Containers {
			if !isKagziImage(c.Image) || w.Kind == "Job" {
				continue
			}
			v := effectiveEnv(tr, c)["KAGZI_NATS_URL"]
			if hosts := natsURLs(t, w.String(), v); !slices.Equal(hosts, pods) {
				t.Errorf("ha: %s: KAGZI_NATS_URL %q names %v, want every pod %v", w, v, hosts, pods)
			}
		}
	}
	// A voluntary disruption never takes the quorum.
	n := 0
	for _, pdb := range all[*policyv1.PodDisruptionBudget](tr) {
		if selects(pdb.Spec.Selector, ss.Spec.Template.Labels) {
			n++
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("ha: PodDisruptionBudget %s: maxUnavailable %v, want 1 (two of three keep the quorum)", pdb.Name, pdb.Spec.MaxUnavailable)
			}
		}
	}
	if n != 1 {
		t.Errorf("ha: %d PodDisruptionBudgets select the nats pods, want 1", n)
	}
}

// TestK8sHAPostgres: Postgres is a CloudNativePG Cluster with quorum
// synchronous replication, and Secret kagzi-database reaches its primary
// by the operator's Services with target_session_attrs=read-write, as the
// roles kagzi migrate --roles makes, the Job as the Cluster's superuser.
func TestK8sHAPostgres(t *testing.T) {
	tr := loadKustomization(t, k8sHAOverlay)
	clusters := all[*cnpgCluster](tr)
	if len(clusters) != 1 {
		t.Fatalf("ha: %d CloudNativePG Clusters, want 1", len(clusters))
	}
	pg := clusters[0]
	sync := pg.Spec.PostgreSQL.Synchronous
	if pg.Spec.Instances < 3 || sync.Method != "any" || sync.Number < 1 || sync.Number > pg.Spec.Instances-2 {
		t.Errorf("ha: Cluster %s: %d instances, synchronous %s %d; want 3 or more, ANY n with a standby to spare "+
			"(with every standby synchronous, one down stops the commits)", pg.Name, pg.Spec.Instances, sync.Method, sync.Number)
	}
	if !strings.HasPrefix(path.Base(pg.Spec.ImageName), "postgresql:15") && !strings.HasPrefix(path.Base(pg.Spec.ImageName), "postgresql:16") {
		t.Errorf("ha: Cluster image %q, want PostgreSQL 15 or 16", pg.Spec.ImageName)
	}
	super, _ := tr.find("Secret", pg.Spec.SuperuserSecret.Name).(*corev1.Secret)
	if !pg.Spec.EnableSuperuserAccess || super == nil || super.Type != corev1.SecretTypeBasicAuth {
		t.Fatalf("ha: Cluster %s: no superuser access through a basic-auth Secret of the overlay (%q): migrate --roles needs one", pg.Name, pg.Spec.SuperuserSecret.Name)
	}
	sec, _ := tr.find("Secret", "kagzi-database").(*corev1.Secret)
	if sec == nil {
		t.Fatal("ha: no Secret kagzi-database")
	}
	db := pg.Spec.Bootstrap.InitDB.Database
	for key, user := range map[string]string{"KAGZI_DATABASE_URL": "kagzi_runtime", "KAGZI_MIGRATE_DATABASE_URL": super.StringData["username"]} {
		v := sec.StringData[key]
		cfg, err := pgconn.ParseConfig(v)
		if err != nil {
			t.Errorf("ha: %s: %v", key, err)
			continue
		}
		hosts := []string{cfg.Host}
		for _, f := range cfg.Fallbacks {
			if !slices.Contains(hosts, f.Host) {
				hosts = append(hosts, f.Host)
			}
		}
		if !slices.Equal(hosts, []string{pg.Name + "-rw", pg.Name + "-r"}) || cfg.Port != 5432 {
			t.Errorf("ha: %s reaches %v, want the operator's %s-rw then %s-r on 5432", key, hosts, pg.Name, pg.Name)
		}
		if cfg.ValidateConnect == nil || reflect.ValueOf(cfg.ValidateConnect).Pointer() !=
			reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer() {
			t.Errorf("ha: %s: no target_session_attrs=read-write: %s-r may land on a standby", key, pg.Name)
		}
		u, err := url.Parse(v)
		if err != nil {
			t.Errorf("ha: %s does not parse as a URL (kagzi migrate reads the database name from it): %v", key, err)
			continue
		}
		pw, _ := u.User.Password()
		wantPW := sec.StringData["KAGZI_DB_RUNTIME_PASSWORD"]
		if key == "KAGZI_MIGRATE_DATABASE_URL" {
			wantPW = super.StringData["password"]
		}
		if u.User.Username() != user || pw != wantPW || strings.TrimPrefix(u.Path, "/") != db {
			t.Errorf("ha: %s %s: want user %s with its password on database %s", key, u.Redacted(), user, db)
		}
		if m := u.Query().Get("sslmode"); m != "require" && m != "verify-ca" && m != "verify-full" {
			t.Errorf("ha: %s: sslmode %q: CloudNativePG serves TLS, use it", key, m)
		}
	}
}
