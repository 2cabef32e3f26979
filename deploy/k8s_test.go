package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const k8sDir = "k8s"

// kustomization is the part of kustomize's Kustomization these manifests
// use; decoding is strict, so a field added to kustomization.yaml must be
// added here (and checked) too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// manifests are the decoded objects of deploy/k8s.
type manifests struct {
	sets     []*appsv1.StatefulSet
	services []*corev1.Service
	pdbs     []*policyv1.PodDisruptionBudget
	kust     *kustomization
	files    []string // every manifest file but kustomization.yaml
}

// loadManifests decodes every document of every YAML file in deploy/k8s
// into its typed Kubernetes object, strictly: an unknown or misspelt field,
// a duplicate key or a kind this test does not know fails.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	paths, err := filepath.Glob(filepath.Join(k8sDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
			t.Errorf("%s: not a YAML manifest; deploy/k8s holds manifests only", p)
			continue
		}
		data := readFile(t, p)
		if name == "kustomization.yaml" {
			var k kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			m.kust = &k
			continue
		}
		m.files = append(m.files, name)
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			where := fmt.Sprintf("%s: document %d (%s %s)", p, i, tm.APIVersion, tm.Kind)
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				s := &appsv1.StatefulSet{}
				m.sets, obj = append(m.sets, s), s
			case "v1 Service":
				s := &corev1.Service{}
				m.services, obj = append(m.services, s), s
			case "policy/v1 PodDisruptionBudget":
				s := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, s), s
			default:
				t.Fatalf("%s: a kind this test does not decode: add it here, with its checks", where)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		}
	}
	if m.kust == nil {
		t.Fatal("deploy/k8s has no kustomization.yaml")
	}
	return m
}

// stripComments drops comment lines, so that a document of comments only
// counts as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func (m manifests) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// TestKustomizationListsEveryManifest: kubectl apply -k applies what
// kustomization.yaml lists, so a manifest it leaves out is never applied,
// and one it names that does not exist fails the apply.
func TestKustomizationListsEveryManifest(t *testing.T) {
	m := loadManifests(t)
	if m.kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || m.kust.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", m.kust.APIVersion, m.kust.Kind)
	}
	got := slices.Clone(m.kust.Resources)
	sort.Strings(got)
	want := slices.Clone(m.files)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want every manifest in deploy/k8s: %v", got, want)
	}
	for _, img := range m.kust.Images {
		if img.Name != kvnodeContainer(t, m).Image {
			t.Errorf("kustomization.yaml rewrites image %q, but the kvnode container runs %q", img.Name, kvnodeContainer(t, m).Image)
		}
	}
}

func statefulSet(t *testing.T, m manifests) *appsv1.StatefulSet {
	t.Helper()
	if len(m.sets) != 1 {
		t.Fatalf("%d StatefulSets in deploy/k8s, want 1", len(m.sets))
	}
	return m.sets[0]
}

func kvnodeContainer(t *testing.T, m manifests) *corev1.Container {
	t.Helper()
	spec := &statefulSet(t, m).Spec.Template.Spec
	for i := range spec.Containers {
		if spec.Containers[i].Name == "kvnode" {
			return &spec.Containers[i]
		}
	}
	t.Fatal("the StatefulSet has no container named kvnode")
	return nil
}

// containerPort resolves a probe's or a service's target port (a number
// or a port name) to the container's port number and protocol.
func containerPort(c *corev1.Container, p intstr.IntOrString, proto corev1.Protocol) (int32, bool) {
	for _, cp := range c.Ports {
		pp := cp.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP
		}
		if pp != proto {
			continue
		}
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// TestStatefulSet checks the kvnode StatefulSet against kvnode's real
// flags: every argument is a kvnode flag; the container ports are the
// ones --grpc-addr, --peer-addr, --gossip-addr (TCP and UDP) and
// --http-addr listen on; the probes hit /readyz and /livez on the
// --http-addr port, over HTTPS since client TLS is on; the advertised
// addresses and --initial-cluster are the pods' stable DNS names under
// the headless service; TLS material comes from Secrets mounted as files;
// the data dir is on the claim template; automatic snapshots are on.
func TestStatefulSet(t *testing.T) {
	m := loadManifests(t)
	real := kvnodeFlags(t)
	s := statefulSet(t, m)
	c := kvnodeContainer(t, m)
	pod := &s.Spec.Template.Spec
	where := "StatefulSet " + s.Name
	if len(c.Command) != 1 || filepath.Base(c.Command[0]) != "kvnode" {
		t.Fatalf("%s: command %q, want the kvnode binary alone (flags in args)", where, c.Command)
	}
	flags := parseFlags(t, where, c.Args, real)

	if s.Spec.Replicas == nil || *s.Spec.Replicas != 3 {
		got := "unset (1)"
		if s.Spec.Replicas != nil {
			got = fmt.Sprint(*s.Spec.Replicas)
		}
		t.Errorf("%s: replicas %s, want 3", where, got)
	}
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("%s: podManagementPolicy %q: a member is ready only with a quorum, so pods must start in parallel", where, s.Spec.PodManagementPolicy)
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
		t.Errorf("%s: selector %v does not select its own pods %v (%v)", where, s.Spec.Selector, s.Spec.Template.Labels, err)
	}

	// Ports: the listen flags' ports are the container's.
	listen := map[string]string{"grpc": "grpc-addr", "peer": "peer-addr", "gossip": "gossip-addr", "http": "http-addr"}
	ports := map[string]int32{}
	for name, flag := range listen {
		v, ok := flags[flag]
		if !ok {
			t.Errorf("%s: no --%s", where, flag)
			continue
		}
		if !strings.HasPrefix(v, "0.0.0.0:") {
			t.Errorf("%s: --%s %s: a pod listens on 0.0.0.0 (its IP changes) and advertises its DNS name", where, flag, v)
		}
		ports[name] = portOf(t, where, flag, v)
		protos := []corev1.Protocol{corev1.ProtocolTCP}
		if name == "gossip" {
			protos = append(protos, corev1.ProtocolUDP) // memberlist: TCP and UDP
		}
		for _, proto := range protos {
			if _, ok := containerPort(c, intstr.FromInt32(ports[name]), proto); !ok {
				t.Errorf("%s: --%s listens on %d/%s, but the container declares no such port (ports: %+v)", where, flag, ports[name], proto, c.Ports)
			}
		}
	}
	for _, cp := range c.Ports {
		found := false
		for _, p := range ports {
			found = found || cp.ContainerPort == p
		}
		if !found {
			t.Errorf("%s: container port %s (%d) is no kvnode listener's", where, cp.Name, cp.ContainerPort)
		}
	}

	// Probes: readiness on /readyz, liveness (and startup) on /livez, all
	// on the HTTP port, HTTPS because --cert-file makes that port TLS.
	scheme := corev1.URISchemeHTTP
	if flags["cert-file"] != "" {
		scheme = corev1.URISchemeHTTPS
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
		need  bool
	}{{"readinessProbe", c.ReadinessProbe, "/readyz", true}, {"livenessProbe", c.LivenessProbe, "/livez", true}, {"startupProbe", c.StartupProbe, "/livez", false}} {
		if pr.probe == nil {
			if pr.need {
				t.Errorf("%s: no %s", where, pr.name)
			}
			continue
		}
		g := pr.probe.HTTPGet
		if g == nil {
			t.Errorf("%s: %s is not an httpGet probe (kubelet's gRPC probe has no TLS)", where, pr.name)
			continue
		}
		if g.Path != pr.path {
			t.Errorf("%s: %s path %q, want %s", where, pr.name, g.Path, pr.path)
		}
		if p, ok := containerPort(c, g.Port, corev1.ProtocolTCP); !ok || p != ports["http"] {
			t.Errorf("%s: %s port %s is %d, want --http-addr's %d", where, pr.name, g.Port.String(), p, ports["http"])
		}
		if g.Scheme != scheme {
			t.Errorf("%s: %s scheme %q, want %s (the HTTP port speaks TLS when --cert-file is set)", where, pr.name, g.Scheme, scheme)
		}
	}

	// Advertised addresses: the pod's stable DNS name under the headless
	// service, with the listener's port.
	if s.Spec.ServiceName == "" || m.service(s.Spec.ServiceName) == nil {
		t.Fatalf("%s: serviceName %q is not a Service in deploy/k8s", where, s.Spec.ServiceName)
	}
	host := func(pod string) string {
		return pod + "." + s.Spec.ServiceName + ".$(POD_NAMESPACE).svc"
	}
	for name, flag := range listen {
		want := fmt.Sprintf("%s:%d", host("$(POD_NAME)"), ports[name])
		if got := flags["advertise-"+name]; got != want {
			t.Errorf("%s: --advertise-%s %q, want %q (so that peers dial the pod's stable name, not %s)", where, name, got, want, flags[flag])
		}
	}
	var initial, join []string
	for i := int32(0); s.Spec.Replicas != nil && i < *s.Spec.Replicas; i++ {
		pod := fmt.Sprintf("%s-%d", s.Name, i)
		initial = append(initial, fmt.Sprintf("%s=%s:%d", pod, host(pod), ports["peer"]))
		join = append(join, fmt.Sprintf("%s:%d", host(pod), ports["gossip"]))
	}
	if got := flags["initial-cluster"]; got != strings.Join(initial, ",") {
		t.Errorf("%s: --initial-cluster %q, want every replica at its advertised peer address: %q", where, got, strings.Join(initial, ","))
	}
	if got := flags["join"]; got != strings.Join(join, ",") {
		t.Errorf("%s: --join %q, want every replica's gossip address: %q", where, got, strings.Join(join, ","))
	}
	if flags["id"] != "$(POD_NAME)" {
		t.Errorf("%s: --id %q, want $(POD_NAME) (the names --initial-cluster lists)", where, flags["id"])
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("%s: the arguments use $(POD_NAME) and $(POD_NAMESPACE), but the env maps them to %v", where, env)
	}

	// Files: TLS and gossip keys from Secrets, the data dir on the claim.
	mountOf := func(path string) (corev1.VolumeMount, bool) {
		var best corev1.VolumeMount
		for _, vm := range c.VolumeMounts {
			if (path == vm.MountPath || strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(best.MountPath) {
				best = vm
			}
		}
		return best, best.Name != ""
	}
	volume := func(name string) *corev1.Volume {
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == name {
				return &pod.Volumes[i]
			}
		}
		return nil
	}
	for _, f := range []string{"peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "cert-file", "key-file", "trusted-ca-file", "gossip-key-file"} {
		path, ok := flags[f]
		if !ok {
			t.Errorf("%s: no --%s: TLS and gossip encryption are on in this deployment", where, f)
			continue
		}
		vm, ok := mountOf(path)
		if !ok {
			t.Errorf("%s: --%s %s is on no volume mount", where, f, path)
			continue
		}
		if v := volume(vm.Name); v == nil || v.Secret == nil || !vm.ReadOnly {
			t.Errorf("%s: --%s %s is on mount %q, which is not a read-only Secret volume", where, f, path, vm.Name)
		}
	}
	vm, ok := mountOf(flags["data-dir"])
	claimed := false
	for _, pvc := range s.Spec.VolumeClaimTemplates {
		claimed = claimed || ok && pvc.Name == vm.Name
	}
	if !claimed {
		t.Errorf("%s: --data-dir %q is not on a volumeClaimTemplate's mount", where, flags["data-dir"])
	}

	// Automatic snapshots through flags, to a store every member reaches.
	if flags["snapshot-interval"] == "" || flags["snapshot-interval"] == "0" || !strings.HasPrefix(flags["snapshot-store"], "s3://") {
		t.Errorf("%s: --snapshot-interval %q, --snapshot-store %q: want automatic snapshots to an s3:// store (a file:// store would be each pod's own disk)",
			where, flags["snapshot-interval"], flags["snapshot-store"])
	}

	// kvnode itself accepts these flags, as the pod kvnode-1 would run
	// them (Kubernetes expands $(VAR) from the container's env).
	expanded := make([]string, len(c.Args))
	for i, a := range c.Args {
		expanded[i] = strings.NewReplacer("$(POD_NAME)", s.Name+"-1", "$(POD_NAMESPACE)", "deploytest").Replace(a)
	}
	kvnodeRefusesOnlyTLS(t, where, expanded, strings.ReplaceAll(flags["peer-cert-file"], "$(POD_NAME)", s.Name+"-1"))

	// Isolation.
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod must run as a non-root uid (securityContext %+v)", where, psc)
	}
	if csc := c.SecurityContext; csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("%s: the container must drop all capabilities, forbid privilege escalation and keep its root file system read-only (%+v)", where, csc)
	}
	anti := false
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			anti = anti || err == nil && term.TopologyKey == "kubernetes.io/hostname" && sel.Matches(labels.Set(s.Spec.Template.Labels))
		}
	}
	if !anti {
		t.Errorf("%s: no required pod anti-affinity on kubernetes.io/hostname that selects its own pods: two replicas could share a machine", where)
	}
}

// TestServices: the headless service gives every pod its DNS name before
// it is ready (members find each other through it), the client service
// reaches the kvnode pods' client port, and every service port targets a
// port the container declares.
func TestServices(t *testing.T) {
	m := loadManifests(t)
	s := statefulSet(t, m)
	c := kvnodeContainer(t, m)
	real := kvnodeFlags(t)
	flags := parseFlags(t, "StatefulSet "+s.Name, c.Args, real)
	if len(m.services) < 2 {
		t.Fatalf("%d Services, want the headless one for peers and one for clients", len(m.services))
	}
	headless := m.service(s.Spec.ServiceName)
	if headless == nil {
		t.Fatalf("no Service %q (the StatefulSet's serviceName)", s.Spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v: want a headless service that publishes not-ready pods (a member is ready only after it reached its peers by name)",
			headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	var client *corev1.Service
	for _, svc := range m.services {
		where := "Service " + svc.Name
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
			t.Errorf("%s: selector %v does not select the kvnode pods %v", where, svc.Spec.Selector, s.Spec.Template.Labels)
		}
		for _, p := range svc.Spec.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			if _, ok := containerPort(c, target, proto); !ok {
				t.Errorf("%s: port %s targets %s/%s, which the kvnode container does not declare", where, p.Name, target.String(), proto)
			}
		}
		if svc != headless {
			client = svc
		}
	}
	if client == nil {
		t.Fatal("no client Service besides the headless one")
	}
	grpcPort := portOf(t, "StatefulSet", "grpc-addr", flags["grpc-addr"])
	ok := false
	for _, p := range client.Spec.Ports {
		got, found := containerPort(c, p.TargetPort, corev1.ProtocolTCP)
		ok = ok || found && got == grpcPort
	}
	if !ok || client.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("Service %s: want a ClusterIP service to --grpc-addr's port %d (ports %+v)", client.Name, grpcPort, client.Spec.Ports)
	}
}

// TestPodDisruptionBudget: at most one member away by choice, on the
// StatefulSet's own pods.
func TestPodDisruptionBudget(t *testing.T) {
	m := loadManifests(t)
	s := statefulSet(t, m)
	if len(m.pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(m.pdbs))
	}
	p := m.pdbs[0]
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.String() != "1" || p.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget %s: maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", p.Name, p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
		t.Errorf("PodDisruptionBudget %s: selector %v does not select the StatefulSet's pods %v (%v)", p.Name, p.Spec.Selector, s.Spec.Template.Labels, err)
	}
}

// TestStrictDecoding: the decoder these tests use refuses a misspelt
// field, so the checks above do not pass on a manifest Kubernetes would
// refuse (or silently ignore a field of).
func TestStrictDecoding(t *testing.T) {
	bad := []byte("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replica: 3\n")
	if err := yaml.UnmarshalStrict(bad, &appsv1.StatefulSet{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
	if _, err := os.Stat(k8sDir); err != nil {
		t.Fatal(err)
	}
}
