package deploy_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/kagzi/kagzi/internal/natsauth"
)

const (
	k8sBase       = "k8s/base"
	k8sDevOverlay = "k8s/overlays/dev"
	k8sHAOverlay  = "k8s/overlays/ha"
	k8sNamespace  = "kagzi"
	kagziImage    = "kagzi" // the image name the kustomizations retag
	nonRootUID    = 65532   // distroless nonroot, the Dockerfile's USER
)

// kagziDeployments are the base's Deployments, by the binary each runs.
var kagziDeployments = map[string]string{
	"dispatcher": "dispatcher",
	"scheduler":  "scheduler",
	"reaper":     "reaper",
	"worker":     "worker",
	"console":    "kagzi",
}

// kustomization is the part of kustomize's Kustomization these
// directories use, decoded strictly: a field this test does not know (a
// patch, a generator option) fails it, so the checks are extended with it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	// Patches are strategic merges of ConfigMap data and Secret
	// stringData only (applyPatch): the overlays patch nothing else.
	Patches            []patchRef `json:"patches,omitempty"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files,omitempty"`
	} `json:"configMapGenerator,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// patchRef is a kustomization's patch given by its file.
type patchRef struct {
	Path string `json:"path"`
}

// object is one decoded manifest document.
type object struct {
	File string // relative to deploy/
	Doc  int
	Kind string
	Obj  any // *appsv1.Deployment, *corev1.ConfigMap...
}

func (o object) String() string { return fmt.Sprintf("%s#%d %s", o.File, o.Doc, o.Kind) }

func (o object) meta() *metav1.ObjectMeta {
	switch v := o.Obj.(type) {
	case *corev1.Namespace:
		return &v.ObjectMeta
	case *corev1.ConfigMap:
		return &v.ObjectMeta
	case *corev1.Secret:
		return &v.ObjectMeta
	case *corev1.Service:
		return &v.ObjectMeta
	case *appsv1.Deployment:
		return &v.ObjectMeta
	case *appsv1.StatefulSet:
		return &v.ObjectMeta
	case *batchv1.Job:
		return &v.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		return &v.ObjectMeta
	case *autoscalingv2.HorizontalPodAutoscaler:
		return &v.ObjectMeta
	case *cnpgCluster:
		return &v.ObjectMeta
	}
	panic(o.Kind)
}

// newObject maps apiVersion and kind to the typed object to decode into.
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, true
	case "batch/v1 Job":
		return &batchv1.Job{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "postgresql.cnpg.io/v1 Cluster":
		return &cnpgCluster{}, true
	}
	return nil, false
}

// tree is what one kustomization directory yields: its objects and those
// of the kustomizations it includes, plus generated ConfigMaps.
type tree struct {
	Dir     string
	K       kustomization
	Objects []object
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// loadKustomization decodes dir/kustomization.yaml and every manifest it
// lists (recursing into included directories), each document strictly
// into its typed Kubernetes object.
func loadKustomization(t *testing.T, dir string) tree {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr := tree{Dir: dir}
	if err := yaml.UnmarshalStrict(raw, &tr.K); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	if tr.K.APIVersion != "kustomize.config.k8s.io/v1beta1" || tr.K.Kind != "Kustomization" {
		t.Errorf("%s/kustomization.yaml: %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", dir, tr.K.APIVersion, tr.K.Kind)
	}
	for _, r := range tr.K.Resources {
		p := filepath.Join(dir, r)
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s/kustomization.yaml: resource %s: %v", dir, r, err)
			continue
		}
		if fi.IsDir() {
			tr.Objects = append(tr.Objects, loadKustomization(t, p).Objects...)
			continue
		}
		tr.Objects = append(tr.Objects, decodeManifests(t, p)...)
	}
	for _, pt := range tr.K.Patches {
		for _, patch := range decodeManifests(t, filepath.Join(dir, pt.Path)) {
			applyPatch(t, &tr, patch)
		}
	}
	for _, g := range tr.K.ConfigMapGenerator {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: tr.K.Namespace}, Data: map[string]string{}}
		for _, f := range g.Files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Errorf("%s: configMapGenerator %s: %v", dir, g.Name, err)
				continue
			}
			cm.Data[filepath.Base(f)] = string(b)
		}
		tr.Objects = append(tr.Objects, object{File: dir + "/kustomization.yaml", Kind: "ConfigMap", Obj: cm})
	}
	return tr
}

// applyPatch merges a ConfigMap's data or a Secret's stringData into the
// object of that kind and name, as kustomize's strategic merge does for
// these maps; a patch of anything else fails the test, to be taught here.
func applyPatch(t *testing.T, tr *tree, patch object) {
	t.Helper()
	name := patch.meta().Name
	for _, o := range tr.Objects {
		if o.Kind != patch.Kind || o.meta().Name != name {
			continue
		}
		switch p := patch.Obj.(type) {
		case *corev1.ConfigMap:
			maps.Copy(o.Obj.(*corev1.ConfigMap).Data, p.Data)
		case *corev1.Secret:
			maps.Copy(o.Obj.(*corev1.Secret).StringData, p.StringData)
		default:
			t.Fatalf("%s: a patch of a %s: this test applies ConfigMap and Secret patches only", patch, patch.Kind)
		}
		return
	}
	t.Errorf("%s: patches %s %s, which %s does not have", patch, patch.Kind, name, tr.Dir)
}

func decodeManifests(t *testing.T, file string) []object {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	for i, doc := range docSep.Split(string(raw), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Errorf("%s#%d: %v", file, i, err)
			continue
		}
		obj, ok := newObject(tm.APIVersion, tm.Kind)
		if !ok {
			t.Errorf("%s#%d: %s %s: not a kind this test knows; add it", file, i, tm.APIVersion, tm.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Errorf("%s#%d (%s): strict decode: %v", file, i, tm.Kind, err)
			continue
		}
		out = append(out, object{File: file, Doc: i, Kind: tm.Kind, Obj: obj})
	}
	return out
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// find returns the object of kind and name, or nil.
func (tr tree) find(kind, name string) any {
	for _, o := range tr.Objects {
		if o.Kind == kind && o.meta().Name == name {
			return o.Obj
		}
	}
	return nil
}

func all[T any](tr tree) []T {
	var out []T
	for _, o := range tr.Objects {
		if v, ok := o.Obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// workload is a pod template and where it comes from.
type workload struct {
	Kind, Name string
	Labels     map[string]string // the pod template's
	Spec       *corev1.PodSpec
}

func workloads(tr tree) []workload {
	var out []workload
	for _, o := range tr.Objects {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment", v.Name, v.Spec.Template.Labels, &v.Spec.Template.Spec})
		case *appsv1.StatefulSet:
			out = append(out, workload{"StatefulSet", v.Name, v.Spec.Template.Labels, &v.Spec.Template.Spec})
		case *batchv1.Job:
			out = append(out, workload{"Job", v.Name, v.Spec.Template.Labels, &v.Spec.Template.Spec})
		}
	}
	return out
}

func (w workload) String() string { return w.Kind + " " + w.Name }

func isKagziImage(image string) bool {
	name, _, _ := strings.Cut(image, ":")
	return name == kagziImage
}

// loadAll loads the base and every overlay.
func loadAll(t *testing.T) []tree {
	t.Helper()
	return []tree{loadKustomization(t, k8sBase), loadKustomization(t, k8sDevOverlay), loadKustomization(t, k8sHAOverlay)}
}

// TestK8sKustomizations: each kustomization lists every manifest of its
// directory, the overlay builds on the base, and every namespaced object
// is in the kagzi namespace.
func TestK8sKustomizations(t *testing.T) {
	for _, dir := range []string{k8sBase, k8sDevOverlay, k8sHAOverlay} {
		tr := loadKustomization(t, dir)
		if tr.K.Namespace != k8sNamespace {
			t.Errorf("%s: namespace %q, want %q", dir, tr.K.Namespace, k8sNamespace)
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		more, _ := filepath.Glob(filepath.Join(dir, "*.yml"))
		for _, f := range append(files, more...) {
			base := filepath.Base(f)
			if base == "kustomization.yaml" || slices.Contains(tr.K.Patches, patchRef{Path: base}) {
				continue
			}
			if !slices.Contains(tr.K.Resources, base) {
				t.Errorf("%s: %s is not listed in kustomization.yaml's resources", dir, base)
			}
		}
		for _, o := range tr.Objects {
			m := o.meta()
			if m.Name == "" {
				t.Errorf("%s: no metadata.name", o)
			}
			if o.Kind == "Namespace" {
				continue
			}
			if m.Namespace != k8sNamespace {
				t.Errorf("%s %s: namespace %q, want %q", o, m.Name, m.Namespace, k8sNamespace)
			}
		}
		// kustomize edit set image kagzi=... must retag every Kagzi container.
		named := false
		for _, im := range tr.K.Images {
			if im.Name == kagziImage {
				named = true
			}
		}
		if !named {
			t.Errorf("%s: kustomization.yaml has no images entry for %q", dir, kagziImage)
		}
	}
	for _, dir := range []string{k8sDevOverlay, k8sHAOverlay} {
		o := loadKustomization(t, dir)
		if !slices.Contains(o.K.Resources, "../../base") {
			t.Errorf("%s does not build on ../../base (resources %v)", dir, o.K.Resources)
		}
	}
}

func TestK8sBaseObjects(t *testing.T) {
	tr := loadKustomization(t, k8sBase)
	if tr.find("Namespace", k8sNamespace) == nil {
		t.Errorf("base: no Namespace %s", k8sNamespace)
	}
	if tr.find("ConfigMap", "kagzi") == nil {
		t.Error("base: no ConfigMap kagzi")
	}
	sec, _ := tr.find("Secret", "kagzi-database").(*corev1.Secret)
	if sec == nil {
		t.Fatal("base: no Secret kagzi-database")
	}
	if _, ok := sec.StringData["KAGZI_DATABASE_URL"]; !ok {
		t.Error("Secret kagzi-database: no stringData KAGZI_DATABASE_URL placeholder")
	}
	job, _ := tr.find("Job", "migrate").(*batchv1.Job)
	if job == nil {
		t.Fatal("base: no Job migrate")
	}
	if c := job.Spec.Template.Spec.Containers; len(c) != 1 || !slices.Equal(c[0].Command, []string{"/usr/local/bin/kagzi", "migrate", "--roles"}) {
		t.Errorf("Job migrate: want one container running [/usr/local/bin/kagzi migrate --roles], have %v", c)
	}
	for name := range kagziDeployments {
		d, _ := tr.find("Deployment", name).(*appsv1.Deployment)
		if d == nil {
			t.Errorf("base: no Deployment %s", name)
			continue
		}
		if name == "worker" {
			continue // the HorizontalPodAutoscaler owns its replica count
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("Deployment %s: replicas %s, want 2", name, ptrString(d.Spec.Replicas))
		}
	}
}

// TestK8sContainers: the binaries, images, resources and security context
// of every container of every workload, base and overlay.
func TestK8sContainers(t *testing.T) {
	built := dockerfileBinaries(t)
	for _, tr := range loadAll(t) {
		for _, w := range workloads(tr) {
			ps := w.Spec
			if len(ps.Containers) == 0 {
				t.Errorf("%s: %s: no containers", tr.Dir, w)
			}
			for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
				where := fmt.Sprintf("%s: %s container %s", tr.Dir, w, c.Name)
				checkResources(t, where, c)
				checkSecurity(t, where, ps, c)
				if c.Image == "" || c.ImagePullPolicy == "" {
					t.Errorf("%s: image %q, imagePullPolicy %q: set both", where, c.Image, c.ImagePullPolicy)
				}
				if !isKagziImage(c.Image) {
					continue
				}
				if len(c.Command) == 0 || !slices.Contains(built, path.Base(c.Command[0])) {
					t.Errorf("%s: command %q does not run a binary of the image (%v)", where, c.Command, built)
				}
				if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
					t.Errorf("%s: mounts a service account token it does not use", where)
				}
				if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
					t.Errorf("%s: enableServiceLinks injects other services' variables (POSTGRES_*...) into the environment", where)
				}
			}
		}
	}
}

func checkResources(t *testing.T, where string, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[r]
		lim, okLim := c.Resources.Limits[r]
		if !okReq || !okLim {
			t.Errorf("%s: %s request and limit must both be set (requests %v, limits %v)", where, r, c.Resources.Requests, c.Resources.Limits)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("%s: %s request %s above its limit %s", where, r, req.String(), lim.String())
		}
	}
}

// checkSecurity checks the effective (container over pod) security
// context: non-root, no privilege escalation, read-only root, no
// capabilities, the runtime's seccomp profile. Kagzi containers run as
// 65532; third-party images of the dev overlay as their own non-root user.
func checkSecurity(t *testing.T, where string, ps *corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc := ps.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		t.Errorf("%s: no securityContext", where)
		return
	}
	runAsNonRoot := csc.RunAsNonRoot
	if runAsNonRoot == nil {
		runAsNonRoot = psc.RunAsNonRoot
	}
	if runAsNonRoot == nil || !*runAsNonRoot {
		t.Errorf("%s: runAsNonRoot is not true", where)
	}
	uid := csc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	switch {
	case uid == nil || *uid == 0:
		t.Errorf("%s: runAsUser %s, want a non-root numeric user", where, ptrString(uid))
	case isKagziImage(c.Image) && *uid != nonRootUID:
		t.Errorf("%s: runAsUser %d, want %d", where, *uid, nonRootUID)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation is not false", where)
	}
	if csc.Privileged != nil && *csc.Privileged {
		t.Errorf("%s: privileged", where)
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", where)
	}
	if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities %v, want drop [ALL] and none added", where, csc.Capabilities)
	}
	sp := csc.SeccompProfile
	if sp == nil {
		sp = psc.SeccompProfile
	}
	if sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: seccompProfile %v, want RuntimeDefault", where, sp)
	}
}

// TestK8sProbes: every Kagzi service container has liveness on /healthz
// and readiness on /readyz at :8080, and exposes 8080; every other
// long-running container has both probes.
func TestK8sProbes(t *testing.T) {
	for _, tr := range loadAll(t) {
		for _, w := range workloads(tr) {
			if w.Kind == "Job" {
				continue
			}
			for _, c := range w.Spec.Containers {
				where := fmt.Sprintf("%s: %s container %s", tr.Dir, w, c.Name)
				if c.LivenessProbe == nil || c.ReadinessProbe == nil {
					t.Errorf("%s: liveness %v, readiness %v: want both", where, c.LivenessProbe, c.ReadinessProbe)
					continue
				}
				if !isKagziImage(c.Image) {
					continue
				}
				checkHTTPProbe(t, where+" liveness", c.LivenessProbe, "/healthz")
				checkHTTPProbe(t, where+" readiness", c.ReadinessProbe, "/readyz")
				exposed := false
				for _, p := range c.Ports {
					exposed = exposed || p.ContainerPort == 8080
				}
				if !exposed {
					t.Errorf("%s: does not declare containerPort 8080", where)
				}
			}
		}
	}
}

func checkHTTPProbe(t *testing.T, where string, p *corev1.Probe, wantPath string) {
	t.Helper()
	g := p.HTTPGet
	if g == nil {
		t.Errorf("%s: not an httpGet probe", where)
		return
	}
	if g.Path != wantPath || g.Port != intstr.FromInt32(8080) {
		t.Errorf("%s: GET %s on port %s, want %s on 8080", where, g.Path, g.Port.String(), wantPath)
	}
}

// TestK8sSelectors: Deployments, StatefulSets, PodDisruptionBudgets and
// Services select their own pods, and each Deployment has a disruption
// budget.
func TestK8sSelectors(t *testing.T) {
	for _, tr := range loadAll(t) {
		for _, d := range all[*appsv1.Deployment](tr) {
			if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
				t.Errorf("%s: Deployment %s: selector %v does not match its pods %v", tr.Dir, d.Name, d.Spec.Selector, d.Spec.Template.Labels)
			}
			n := 0
			for _, pdb := range all[*policyv1.PodDisruptionBudget](tr) {
				if selects(pdb.Spec.Selector, d.Spec.Template.Labels) {
					n++
					if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
						t.Errorf("%s: PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", tr.Dir, pdb.Name)
					}
				}
			}
			if n != 1 {
				t.Errorf("%s: Deployment %s: %d PodDisruptionBudgets select its pods, want 1", tr.Dir, d.Name, n)
			}
		}
		for _, s := range all[*appsv1.StatefulSet](tr) {
			if !selects(s.Spec.Selector, s.Spec.Template.Labels) {
				t.Errorf("%s: StatefulSet %s: selector does not match its pods", tr.Dir, s.Name)
			}
			if tr.find("Service", s.Spec.ServiceName) == nil {
				t.Errorf("%s: StatefulSet %s: serviceName %q is no Service", tr.Dir, s.Name, s.Spec.ServiceName)
			}
		}
		for _, svc := range all[*corev1.Service](tr) {
			var target *workload
			for _, w := range workloads(tr) {
				if selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, w.Labels) {
					target = &w
				}
			}
			if target == nil {
				t.Errorf("%s: Service %s selects no pods", tr.Dir, svc.Name)
				continue
			}
			for _, p := range svc.Spec.Ports {
				if !hasPort(target.Spec, p.TargetPort) {
					t.Errorf("%s: Service %s port %s: target %s is not a port of %s", tr.Dir, svc.Name, p.Name, p.TargetPort.String(), target)
				}
			}
		}
	}
}

func selects(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels) == 0 || len(sel.MatchExpressions) > 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func hasPort(ps *corev1.PodSpec, port intstr.IntOrString) bool {
	for _, c := range ps.Containers {
		for _, p := range c.Ports {
			if (port.Type == intstr.String && p.Name == port.StrVal) || (port.Type == intstr.Int && p.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

func TestK8sWorkerAutoscaling(t *testing.T) {
	tr := loadKustomization(t, k8sBase)
	hpas := all[*autoscalingv2.HorizontalPodAutoscaler](tr)
	if len(hpas) != 1 {
		t.Fatalf("base: %d HorizontalPodAutoscalers, want one for the worker", len(hpas))
	}
	h := hpas[0]
	ref := h.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != "worker" {
		t.Errorf("HorizontalPodAutoscaler %s targets %s %s %s, want apps/v1 Deployment worker", h.Name, ref.APIVersion, ref.Kind, ref.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 1 || h.Spec.MaxReplicas <= *h.Spec.MinReplicas {
		t.Errorf("HorizontalPodAutoscaler %s: min %s max %d, want 1 <= min < max", h.Name, ptrString(h.Spec.MinReplicas), h.Spec.MaxReplicas)
	}
	cpu := false
	for _, m := range h.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil {
			cpu = true
		}
	}
	if !cpu {
		t.Errorf("HorizontalPodAutoscaler %s: no CPU utilization target", h.Name)
	}
	d, _ := tr.find("Deployment", "worker").(*appsv1.Deployment)
	if d == nil {
		t.Fatal("no Deployment worker")
	}
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment worker sets replicas %d: each apply would fight the autoscaler", *d.Spec.Replicas)
	}
}

// TestK8sWorkerHasNoDatabase: nothing the worker's pod gets carries
// database access.
func TestK8sWorkerHasNoDatabase(t *testing.T) {
	for _, tr := range loadAll(t) {
		d, _ := tr.find("Deployment", "worker").(*appsv1.Deployment)
		if d == nil {
			t.Fatalf("%s: no Deployment worker", tr.Dir)
		}
		ps := d.Spec.Template.Spec
		for _, v := range ps.Volumes {
			if v.Secret != nil || v.Projected != nil {
				t.Errorf("%s: worker mounts volume %s from a Secret", tr.Dir, v.Name)
			}
		}
		for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
			for _, e := range c.Env {
				// Its NATS password is the one Secret value a worker gets.
				if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil &&
					!(ref.SecretKeyRef.Name == "kagzi-nats" && strings.HasPrefix(ref.SecretKeyRef.Key, "KAGZI_NATS_PASSWORD_WORKER_")) {
					t.Errorf("%s: worker env %s comes from Secret %s", tr.Dir, e.Name, ref.SecretKeyRef.Name)
				}
				if isCredential(e.Name, e.Value) {
					t.Errorf("%s: worker env %s=%q: workers get no database access", tr.Dir, e.Name, e.Value)
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil {
					t.Errorf("%s: worker loads Secret %s", tr.Dir, ef.SecretRef.Name)
				}
				if ef.ConfigMapRef != nil {
					if cm, _ := tr.find("ConfigMap", ef.ConfigMapRef.Name).(*corev1.ConfigMap); cm != nil {
						for k, v := range cm.Data {
							if isCredential(k, v) {
								t.Errorf("%s: worker loads ConfigMap %s with %s=%q", tr.Dir, cm.Name, k, v)
							}
						}
					}
				}
			}
		}
	}
}

// effectiveEnv resolves what a container's environment sets: literal
// values, ConfigMap values, and Secret references by name and key.
func effectiveEnv(tr tree, c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			if cm, _ := tr.find("ConfigMap", ef.ConfigMapRef.Name).(*corev1.ConfigMap); cm != nil {
				for k, v := range cm.Data {
					out[ef.Prefix+k] = v
				}
			}
		case ef.SecretRef != nil:
			if s, _ := tr.find("Secret", ef.SecretRef.Name).(*corev1.Secret); s != nil {
				for _, k := range slices.Concat(keys(s.StringData), keys(s.Data)) {
					out[ef.Prefix+k] = "secret " + s.Name + "/" + k
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm, _ := tr.find("ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name).(*corev1.ConfigMap); cm != nil {
				out[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		default:
			out[e.Name] = fmt.Sprintf("from %v", e.ValueFrom)
		}
	}
	return out
}

// TestK8sSharedSettings: the services agree on the variables several of
// them read (KAGZI_LEASE: dispatcher and reaper; URLs; payload limits).
func TestK8sSharedSettings(t *testing.T) {
	vars := processVars(t)
	for _, tr := range loadAll(t) {
		shared := map[string]map[string]string{}
		for _, d := range all[*appsv1.Deployment](tr) {
			for _, c := range d.Spec.Template.Spec.Containers {
				if !isKagziImage(c.Image) || len(c.Command) == 0 {
					continue
				}
				if _, ok := serviceConfigs[path.Base(c.Command[0])]; ok {
					shared[path.Base(c.Command[0])] = effectiveEnv(tr, c)
				}
			}
		}
		if len(shared) != len(serviceConfigs) {
			t.Errorf("%s: Deployments run %v, want every service %v", tr.Dir, keys(shared), keys(serviceConfigs))
		}
		checkShared(t, tr.Dir, shared, vars)
	}
}

// TestK8sEnvironment: every variable a Kagzi container gets (env, and the
// keys of the ConfigMaps and Secrets it loads) is one its binary reads,
// and every ConfigMap, Secret and key referenced exists.
func TestK8sEnvironment(t *testing.T) {
	vars := processVars(t)
	for _, tr := range loadAll(t) {
		for _, w := range workloads(tr) {
			for _, c := range w.Spec.Containers {
				if !isKagziImage(c.Image) || len(c.Command) == 0 {
					continue
				}
				where := fmt.Sprintf("%s: %s container %s", tr.Dir, w, c.Name)
				var names []string
				for _, e := range c.Env {
					names = append(names, e.Name)
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						ref := e.ValueFrom.SecretKeyRef
						s, _ := tr.find("Secret", ref.Name).(*corev1.Secret)
						if s == nil {
							t.Errorf("%s: env %s: no Secret %s", where, e.Name, ref.Name)
						} else if _, ok := s.StringData[ref.Key]; !ok {
							if _, ok := s.Data[ref.Key]; !ok {
								t.Errorf("%s: env %s: Secret %s has no key %s", where, e.Name, ref.Name, ref.Key)
							}
						}
					}
					if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
						ref := e.ValueFrom.ConfigMapKeyRef
						cm, _ := tr.find("ConfigMap", ref.Name).(*corev1.ConfigMap)
						if cm == nil || cm.Data[ref.Key] == "" {
							t.Errorf("%s: env %s: no ConfigMap %s key %s", where, e.Name, ref.Name, ref.Key)
						}
					}
				}
				for _, ef := range c.EnvFrom {
					switch {
					case ef.ConfigMapRef != nil:
						cm, _ := tr.find("ConfigMap", ef.ConfigMapRef.Name).(*corev1.ConfigMap)
						if cm == nil {
							t.Errorf("%s: envFrom: no ConfigMap %s", where, ef.ConfigMapRef.Name)
							continue
						}
						for _, k := range keys(cm.Data) {
							names = append(names, ef.Prefix+k)
						}
					case ef.SecretRef != nil:
						s, _ := tr.find("Secret", ef.SecretRef.Name).(*corev1.Secret)
						if s == nil {
							t.Errorf("%s: envFrom: no Secret %s", where, ef.SecretRef.Name)
							continue
						}
						for _, k := range slices.Concat(keys(s.StringData), keys(s.Data)) {
							names = append(names, ef.Prefix+k)
						}
					}
				}
				if dup := duplicates(names); len(dup) > 0 {
					t.Errorf("%s: %v set twice", where, dup)
				}
				process := path.Base(c.Command[0])
				checkEnv(t, where, process, names, vars)
				if _, ok := serviceConfigs[process]; ok {
					if !slices.Contains(names, "KAGZI_NATS_URL") {
						t.Errorf("%s: no KAGZI_NATS_URL", where)
					}
					if !slices.Contains(names, "OTEL_SERVICE_NAME") {
						t.Errorf("%s: no OTEL_SERVICE_NAME", where)
					}
				}
				if slices.Contains(databaseServices, process) || process == "kagzi" {
					if !slices.Contains(names, "KAGZI_DATABASE_URL") {
						t.Errorf("%s: no KAGZI_DATABASE_URL", where)
					}
				}
			}
		}
	}
}

func duplicates(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if seen[n] {
			out = append(out, n)
		}
		seen[n] = true
	}
	return out
}

// TestK8sWorkerGracePeriod: Kubernetes must not kill a worker before its
// drain (KAGZI_DRAIN_TIMEOUT) is over.
func TestK8sWorkerGracePeriod(t *testing.T) {
	tr := loadKustomization(t, k8sBase)
	d, _ := tr.find("Deployment", "worker").(*appsv1.Deployment)
	if d == nil {
		t.Fatal("no Deployment worker")
	}
	drainText := processVars(t)["worker"]["KAGZI_DRAIN_TIMEOUT"].Default
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef == nil {
				continue
			}
			if cm, _ := tr.find("ConfigMap", ef.ConfigMapRef.Name).(*corev1.ConfigMap); cm != nil && cm.Data["KAGZI_DRAIN_TIMEOUT"] != "" {
				drainText = cm.Data["KAGZI_DRAIN_TIMEOUT"]
			}
		}
		for _, e := range c.Env {
			if e.Name == "KAGZI_DRAIN_TIMEOUT" {
				drainText = e.Value
			}
		}
	}
	drain, err := time.ParseDuration(drainText)
	if err != nil {
		t.Fatalf("KAGZI_DRAIN_TIMEOUT %q: %v", drainText, err)
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil || time.Duration(*grace)*time.Second <= drain {
		t.Errorf("worker terminationGracePeriodSeconds %s, want more than KAGZI_DRAIN_TIMEOUT %v", ptrString(grace), drain)
	}
}

// TestK8sDevOverlay: the dev overlay's Postgres and NATS are what the
// base's placeholder Secret and ConfigMap point at.
func TestK8sDevOverlay(t *testing.T) {
	tr := loadKustomization(t, k8sDevOverlay)
	for _, name := range []string{"postgres", "nats"} {
		s, _ := tr.find("StatefulSet", name).(*appsv1.StatefulSet)
		if s == nil {
			t.Errorf("dev: no StatefulSet %s", name)
			continue
		}
		if s.Spec.Replicas == nil || *s.Spec.Replicas != 1 {
			t.Errorf("dev: StatefulSet %s: replicas %s, want 1 (single node)", name, ptrString(s.Spec.Replicas))
		}
		if tr.find("Service", name) == nil {
			t.Errorf("dev: no Service %s", name)
		}
	}

	// Postgres: the Secret's URL reaches the Service with the credentials
	// the Postgres container is initialised with.
	sec, _ := tr.find("Secret", "kagzi-database").(*corev1.Secret)
	pgSec, _ := tr.find("Secret", "postgres").(*corev1.Secret)
	if sec == nil || pgSec == nil {
		t.Fatal("dev: Secret kagzi-database or postgres missing")
	}
	// The migrate Job connects as the administrator and makes the runtime
	// role, with the password the services' URL carries.
	u, err := url.Parse(sec.StringData["KAGZI_MIGRATE_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	checkServiceAddr(t, tr, "KAGZI_MIGRATE_DATABASE_URL", u.Host)
	pw, _ := u.User.Password()
	if u.User.Username() != pgSec.StringData["POSTGRES_USER"] || pw != pgSec.StringData["POSTGRES_PASSWORD"] ||
		strings.TrimPrefix(u.Path, "/") != pgSec.StringData["POSTGRES_DB"] {
		t.Errorf("dev: KAGZI_MIGRATE_DATABASE_URL %s does not match Secret postgres %v", u.Redacted(), pgSec.StringData)
	}
	ru, err := url.Parse(sec.StringData["KAGZI_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	checkServiceAddr(t, tr, "KAGZI_DATABASE_URL", ru.Host)
	rpw, _ := ru.User.Password()
	if ru.User.Username() != "kagzi_runtime" || rpw != sec.StringData["KAGZI_DB_RUNTIME_PASSWORD"] || ru.Path != u.Path {
		t.Errorf("dev: KAGZI_DATABASE_URL %s is not the runtime role kagzi migrate --roles makes", ru.Redacted())
	}

	// NATS: the ConfigMap's URL reaches the Service, and the server runs
	// with deploy/nats/nats.conf (max_payload, monitoring, JetStream).
	cm, _ := tr.find("ConfigMap", "kagzi").(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("dev: no ConfigMap kagzi")
	}
	nu, err := url.Parse(cm.Data["KAGZI_NATS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	checkServiceAddr(t, tr, "KAGZI_NATS_URL", nu.Host)

	nats, _ := tr.find("StatefulSet", "nats").(*appsv1.StatefulSet)
	if nats == nil {
		t.FailNow()
	}
	c := nats.Spec.Template.Spec.Containers[0]
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("dev: nats args %q do not load a config file", c.Args)
	}
	confPath := c.Args[i+1]
	var confMap string
	for _, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(confPath) {
			for _, v := range nats.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					confMap = v.ConfigMap.Name
				}
			}
		}
	}
	natsCM, _ := tr.find("ConfigMap", confMap).(*corev1.ConfigMap)
	if natsCM == nil {
		t.Fatalf("dev: nats: %s is not mounted from a ConfigMap of the overlay", confPath)
	}
	conf, ok := natsCM.Data[path.Base(confPath)]
	if !ok {
		t.Fatalf("dev: ConfigMap %s has no %s", confMap, path.Base(confPath))
	}
	compose, err := os.ReadFile(filepath.Join("nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if conf != string(compose) {
		t.Errorf("dev: %s differs from deploy/nats/nats.conf; keep the two the same", confPath)
	}
	dir := t.TempDir()
	for name, data := range natsCM.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	authConf, err := os.ReadFile(filepath.Join("nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if natsCM.Data["auth.conf"] != string(authConf) {
		t.Errorf("dev: ConfigMap %s's auth.conf differs from deploy/nats/auth.conf; keep the two the same", confMap)
	}
	// The server starts through start.sh, which quotes the passwords.
	startSh, err := os.ReadFile(filepath.Join("nats", "start.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if natsCM.Data[path.Base(natsStartScript)] != string(startSh) {
		t.Errorf("dev: ConfigMap %s's start.sh differs from deploy/nats/start.sh; keep the two the same", confMap)
	}
	if !slices.Equal(c.Command, []string{"sh", natsStartScript}) || path.Dir(natsStartScript) != path.Dir(confPath) {
		t.Errorf("dev: nats command %q, want sh %s from the ConfigMap", c.Command, natsStartScript)
	}
	checkNATSConf(t, filepath.Join(dir, "nats.conf"))
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || !hasPort(&nats.Spec.Template.Spec, p.HTTPGet.Port) {
			t.Errorf("dev: nats probe %v, want GET /healthz on the monitoring port", p)
		}
	}
}

// checkServiceAddr checks host:port names a Service of the overlay and
// one of its ports.
func checkServiceAddr(t *testing.T, tr tree, what, hostport string) {
	t.Helper()
	host, portText, ok := strings.Cut(hostport, ":")
	port, err := strconv.Atoi(portText)
	if !ok || err != nil {
		t.Errorf("dev: %s: %q has no host:port", what, hostport)
		return
	}
	svc, _ := tr.find("Service", strings.TrimSuffix(host, "."+k8sNamespace+".svc")).(*corev1.Service)
	if svc == nil {
		t.Errorf("dev: %s: host %q is no Service of the overlay", what, host)
		return
	}
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == port {
			return
		}
	}
	t.Errorf("dev: %s: Service %s has no port %d", what, svc.Name, port)
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// TestK8sNATSAuth: every Kagzi Deployment connects to NATS as its role's
// user of `kagzi nats-config`, with that user's password from Secret
// kagzi-nats, which holds every user's; the dev NATS reads them all.
func TestK8sNATSAuth(t *testing.T) {
	users, err := natsauth.Users(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]natsauth.User{}
	for _, u := range users {
		byName[u.Name] = u
	}
	wantUser := map[string]string{"dispatcher": "dispatcher", "scheduler": "scheduler", "reaper": "reaper", "worker": "worker-default-worker"}
	for _, tr := range loadAll(t) {
		sec, _ := tr.find("Secret", "kagzi-nats").(*corev1.Secret)
		if sec == nil {
			t.Fatalf("%s: no Secret kagzi-nats", tr.Dir)
		}
		for _, u := range users {
			if sec.StringData[u.PasswordVar] == "" {
				t.Errorf("%s: Secret kagzi-nats has no %s (user %s)", tr.Dir, u.PasswordVar, u.Name)
			}
		}
		for name, user := range wantUser {
			d, _ := tr.find("Deployment", name).(*appsv1.Deployment)
			if d == nil {
				t.Fatalf("%s: no Deployment %s", tr.Dir, name)
			}
			env := effectiveEnv(tr, d.Spec.Template.Spec.Containers[0])
			if env["KAGZI_NATS_USER"] != user {
				t.Errorf("%s: %s: KAGZI_NATS_USER %q, want %q", tr.Dir, name, env["KAGZI_NATS_USER"], user)
			}
			if want := "secret kagzi-nats/" + byName[user].PasswordVar; env["KAGZI_NATS_PASSWORD"] != want {
				t.Errorf("%s: %s: KAGZI_NATS_PASSWORD from %q, want %s", tr.Dir, name, env["KAGZI_NATS_PASSWORD"], want)
			}
			if name == "worker" && (env["KAGZI_NAMESPACE"] != byName[user].Namespace || env["KAGZI_WORKER_IDENTITY"] != byName[user].Identity) {
				t.Errorf("%s: worker serves %s as %s, its NATS user is for %s/%s", tr.Dir, env["KAGZI_NAMESPACE"], env["KAGZI_WORKER_IDENTITY"],
					byName[user].Namespace, byName[user].Identity)
			}
		}
		if tr.Dir == k8sDevOverlay || tr.Dir == k8sHAOverlay {
			n, _ := tr.find("StatefulSet", "nats").(*appsv1.StatefulSet)
			if n == nil {
				t.Fatalf("%s: no StatefulSet nats", tr.Dir)
			}
			env := effectiveEnv(tr, n.Spec.Template.Spec.Containers[0])
			for _, u := range users {
				if env[u.PasswordVar] != "secret kagzi-nats/"+u.PasswordVar {
					t.Errorf("%s: nats does not read %s from Secret kagzi-nats", tr.Dir, u.PasswordVar)
				}
			}
		}
	}
}
