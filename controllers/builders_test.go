package controllers

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

const testImage = "example.com/kafka-mirror:test"

// newMirror is a minimal valid KafkaMirror; mutate adjusts it per test.
func newMirror(mutate ...func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "0000-uid", Generation: 3},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source: v1alpha1.ClusterSpec{BootstrapServers: []string{"source-kafka:9092"}},
			Target: v1alpha1.ClusterSpec{BootstrapServers: []string{"target-kafka:9092"}},
			Topics: v1alpha1.TopicsSpec{Include: []string{`orders\..*`}},
		},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func withSecrets(m *v1alpha1.KafkaMirror) {
	m.Spec.Source.SASL = &v1alpha1.SASLSpec{
		Mechanism: v1alpha1.SASLSCRAMSHA512, Username: "mirror",
		PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "source-creds", Key: "pw"},
	}
	m.Spec.Source.TLS = &v1alpha1.TLSSpec{CASecretRef: &v1alpha1.SecretKeyReference{Name: "source-ca"}}
	m.Spec.Target.TLS = &v1alpha1.TLSSpec{
		CASecretRef:   &v1alpha1.SecretKeyReference{Name: "target-ca", Key: "bundle.pem"},
		CertSecretRef: &v1alpha1.CertSecretReference{Name: "target-client"},
	}
}

func TestRenderConfig(t *testing.T) {
	tests := map[string]struct {
		mirror *v1alpha1.KafkaMirror
		check  func(t *testing.T, c *config.Config)
	}{
		"defaults": {
			mirror: newMirror(),
			check: func(t *testing.T, c *config.Config) {
				want := &config.Config{
					APIVersion: config.APIVersion, Kind: config.Kind,
					Source:        config.Cluster{BootstrapServers: []string{"source-kafka:9092"}, ClientID: config.DefaultClientID},
					Target:        config.Cluster{BootstrapServers: []string{"target-kafka:9092"}, ClientID: config.DefaultClientID},
					ConsumerGroup: "kafka-mirror.shop.orders",
					InitialOffset: config.InitialOffsetOldest,
					Topics:        config.Topics{Include: []string{`orders\..*`}, ConfigExclude: config.DefaultTopicConfigExclude},
					Partitioning:  config.PartitioningPreserve,
					SyncTopics:    config.BoolPtr(false), NoDataLoss: config.BoolPtr(true), SyncTopicConfigs: config.BoolPtr(true),
					Streams:                 1,
					OffsetCommitInterval:    config.Duration{Duration: 5 * time.Second},
					DeliveryTimeout:         config.Duration{Duration: 2 * time.Minute},
					TopicSyncInterval:       config.Duration{Duration: 30 * time.Second},
					MaxInFlightPerPartition: config.DefaultMaxInFlightPerPartition,
					Delivery:                config.DeliveryAtLeastOnce,
					TransactionInterval:     config.Duration{Duration: 100 * time.Millisecond},
					Metrics:                 config.Metrics{Address: ":8080"},
					Consumer:                &config.Consumer{GroupInstanceID: "${KAFKA_MIRROR_POD_NAME}"},
				}
				if !reflect.DeepEqual(c, want) {
					t.Fatalf("rendered\n%+v\nwant\n%+v", c, want)
				}
			},
		},
		"every field maps to its config field": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				s := &m.Spec
				s.ConsumerGroup = "my-group"
				s.Source.ClientID = "src-client"
				s.Topics.Exclude = []string{`orders\.tmp\..*`}
				s.Topics.Rename = &v1alpha1.RenameSpec{Template: "dc1.{topic}"}
				s.Partitioning = v1alpha1.PartitioningHash
				s.SyncTopicConfigs = ptr.To(false)
				s.Topics.ReplicationFactor = ptr.To[int32](2)
				s.Topics.ConfigExclude = []string{`retention\..*`}
				s.TopicSyncInterval = &metav1.Duration{Duration: 10 * time.Second}
				s.NoDataLoss = ptr.To(false)
				s.Streams = 4
				s.OffsetCommitInterval = &metav1.Duration{Duration: time.Second}
				s.DeliveryTimeout = &metav1.Duration{Duration: time.Minute}
				s.MaxInFlightPerPartition = 500
				s.MaxInFlightBytes = 64 << 20
				s.InitialOffset = "latest"
				s.Producer = &v1alpha1.ProducerSpec{MaxMessageBytes: 65536}
				s.Handlers = []v1alpha1.HandlerSpec{
					{CEL: &v1alpha1.CELHandler{Filter: "true", OnError: v1alpha1.OnErrorSkip, Transform: &v1alpha1.CELTransform{Value: "record.value"}}},
					{Name: "headerFilter", Args: map[string]string{"drop": "x"}},
				}
				s.RebalanceListener = &v1alpha1.PluginSpec{Name: "log", Args: map[string]string{"level": "info"}}
			}),
			check: func(t *testing.T, c *config.Config) {
				got := []any{c.ConsumerGroup, c.Source.ClientID, c.Topics.Exclude, *c.Topics.Rename, c.Partitioning, c.SyncTopicConfigs,
					c.TopicSyncInterval.Duration, *c.NoDataLoss, c.Streams, c.OffsetCommitInterval.Duration, c.DeliveryTimeout.Duration,
					c.MaxInFlightPerPartition, c.Handlers[0].CEL.Filter, c.Handlers[0].CEL.OnError, c.Handlers[0].CEL.Transform.Value,
					c.Handlers[1].Name, c.Handlers[1].Args, *c.RebalanceListener, *c.SyncTopics,
					c.MaxInFlightBytes, c.InitialOffset, c.Producer.MaxMessageBytes, c.Topics.ReplicationFactor, c.Topics.ConfigExclude}
				want := []any{"my-group", "src-client", []string{`orders\.tmp\..*`}, config.Rename{Template: "dc1.{topic}"}, config.PartitioningHash, config.BoolPtr(false),
					10 * time.Second, false, 4, time.Second, time.Minute,
					500, "true", config.OnErrorSkip, "record.value",
					"headerFilter", map[string]string{"drop": "x"}, config.PluginSpec{Name: "log", Args: map[string]string{"level": "info"}}, false,
					int64(64 << 20), config.InitialOffsetLatest, 65536, int32(2), []string{`retention\..*`}}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("rendered\n%#v\nwant\n%#v", got, want)
				}
			},
		},
		"rename.stripPrefix maps to the config's": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				m.Spec.Topics.Include = []string{`dc1\.orders\..*`}
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{StripPrefix: "dc1."}
			}),
			check: func(t *testing.T, c *config.Config) {
				if want := (config.Rename{StripPrefix: "dc1."}); c.Topics.Rename == nil || *c.Topics.Rename != want {
					t.Fatalf("rendered rename %+v, want %+v", c.Topics.Rename, want)
				}
				if got := c.Topics.Rename.TargetTopic("dc1.orders.eu"); got != "orders.eu" {
					t.Fatalf("rendered rename maps dc1.orders.eu to %q, want orders.eu", got)
				}
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
			},
		},
		"groups map to the config's groups": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"app-.*"}, Exclude: []string{"app-tmp"}, SyncInterval: &metav1.Duration{Duration: 10 * time.Second}}
			}),
			check: func(t *testing.T, c *config.Config) {
				want := &config.Groups{Include: []string{"app-.*"}, Exclude: []string{"app-tmp"}, SyncInterval: config.Duration{Duration: 10 * time.Second}}
				if !reflect.DeepEqual(c.Groups, want) {
					t.Fatalf("rendered groups %+v, want %+v", c.Groups, want)
				}
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
			},
		},
		"exactly-once": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				m.Spec.Delivery = "exactlyOnce"
				m.Spec.TransactionInterval = &metav1.Duration{Duration: 250 * time.Millisecond}
			}),
			check: func(t *testing.T, c *config.Config) {
				if c.Delivery != config.DeliveryExactlyOnce || c.TransactionInterval.Duration != 250*time.Millisecond {
					t.Fatalf("delivery %q, transactionInterval %v; want exactlyOnce, 250ms", c.Delivery, c.TransactionInterval.Duration)
				}
				if err := c.Validate(); err != nil {
					t.Fatalf("the rendered exactly-once config is invalid: %v", err)
				}
			},
		},
		"secrets become file paths the pods mount": {
			mirror: newMirror(withSecrets),
			check: func(t *testing.T, c *config.Config) {
				got := []string{c.Source.SASL.PasswordFile, c.Source.TLS.CAFile, c.Target.TLS.CAFile, c.Target.TLS.CertFile, c.Target.TLS.KeyFile}
				want := []string{
					"/etc/kafka-mirror/secrets/source-sasl/password",
					"/etc/kafka-mirror/secrets/source-ca/ca.crt",
					"/etc/kafka-mirror/secrets/target-ca/ca.crt",
					"/etc/kafka-mirror/secrets/target-cert/tls.crt",
					"/etc/kafka-mirror/secrets/target-cert/tls.key",
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("secret files %q, want %q", got, want)
				}
				if c.Source.SASL.Username != "mirror" || c.Source.SASL.Mechanism != config.SASLSCRAMSHA512 {
					t.Fatalf("sasl = %+v", c.Source.SASL)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { tc.check(t, RenderConfig(tc.mirror)) })
	}
}

// TestConfigMapContract: the mirror.yaml the operator writes is what the engine loads,
// through the engine's own loader, and it holds no credentials.
func TestConfigMapContract(t *testing.T) {
	for name, m := range map[string]*v1alpha1.KafkaMirror{
		"plain":        newMirror(),
		"with secrets": newMirror(withSecrets),
		"with handlers": newMirror(func(m *v1alpha1.KafkaMirror) {
			m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{Filter: `!("skip" in record.headers)`}}}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			cfg := RenderConfig(m)
			data, err := config.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			cm := mirrorConfigMap(m, data)
			loaded, err := config.Parse([]byte(cm.Data["mirror.yaml"]))
			if err != nil {
				t.Fatalf("the engine rejects the rendered mirror.yaml: %v\n%s", err, cm.Data["mirror.yaml"])
			}
			if !reflect.DeepEqual(loaded, cfg) {
				t.Fatalf("loaded config differs from rendered:\n%+v\n%+v", loaded, cfg)
			}
			if loaded.SyncTopicsEnabled() {
				t.Fatal("the engine would sync topics itself; the operator does it")
			}
			if len(cm.Data) != 1 || cm.Name != "orders-mirror-config" || cm.Namespace != "shop" {
				t.Fatalf("configmap %s/%s with keys %v", cm.Namespace, cm.Name, cm.Data)
			}
		})
	}
}

func TestMirrorDeployment(t *testing.T) {
	tests := map[string]struct {
		mirror *v1alpha1.KafkaMirror
		check  func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView)
	}{
		"defaults": {
			mirror: newMirror(),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				expect(t, "name", d.Name, "orders-mirror")
				expect(t, "replicas", *d.Spec.Replicas, int32(1))
				expect(t, "image", d.c.Image, testImage)
				expect(t, "args", d.c.Args, []string{"run", "--config", "/etc/kafka-mirror/mirror.yaml", "--log-format", "json"})
				expect(t, "selector", d.Spec.Selector.MatchLabels, map[string]string{labelName: "kafka-mirror", labelInstance: "orders"})
				expect(t, "hash", d.Spec.Template.Annotations[ConfigHashAnnotation], "hash-1")
				expect(t, "owner", d.OwnerReferences[0].Name+"/"+d.OwnerReferences[0].Kind+"/"+string(d.OwnerReferences[0].UID), "orders/KafkaMirror/0000-uid")
				expect(t, "controller", *d.OwnerReferences[0].Controller, true)
				expect(t, "liveness", d.c.LivenessProbe.HTTPGet.Path, "/healthz")
				expect(t, "readiness", d.c.ReadinessProbe.HTTPGet.Path, "/readyz")
				expect(t, "port", d.c.Ports[0].ContainerPort, int32(8080))
				expect(t, "grace", *d.Spec.Template.Spec.TerminationGracePeriodSeconds, int64(150))
				expect(t, "token", *d.Spec.Template.Spec.AutomountServiceAccountToken, false)
				expect(t, "volumes", d.volumeNames(), []string{"config", "tmp"})
				expect(t, "config mount", d.mounts()["config"], "/etc/kafka-mirror/mirror.yaml")
			},
		},
		"restricted security context": {
			mirror: newMirror(),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				psc, sc := d.Spec.Template.Spec.SecurityContext, d.c.SecurityContext
				expect(t, "pod runAsNonRoot", *psc.RunAsNonRoot, true)
				expect(t, "pod seccomp", psc.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault)
				expect(t, "runAsNonRoot", *sc.RunAsNonRoot, true)
				expect(t, "readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true)
				expect(t, "allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false)
				expect(t, "drop", sc.Capabilities.Drop, []corev1.Capability{"ALL"})
				expect(t, "seccomp", sc.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault)
			},
		},
		"secrets mounted read-only with only their keys": {
			mirror: newMirror(withSecrets),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				expect(t, "volumes", d.volumeNames(), []string{"config", "tmp", "source-sasl", "source-ca", "target-ca", "target-cert"})
				v := d.volume("source-sasl").Secret
				expect(t, "sasl secret", v.SecretName, "source-creds")
				expect(t, "sasl items", v.Items, []corev1.KeyToPath{{Key: "pw", Path: "password"}})
				expect(t, "sasl mode", *v.DefaultMode, int32(0o440))
				expect(t, "source ca items", d.volume("source-ca").Secret.Items, []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}})
				expect(t, "target ca items", d.volume("target-ca").Secret.Items, []corev1.KeyToPath{{Key: "bundle.pem", Path: "ca.crt"}})
				expect(t, "cert items", d.volume("target-cert").Secret.Items, []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}})
				expect(t, "sasl mount", d.mounts()["source-sasl"], "/etc/kafka-mirror/secrets/source-sasl")
				for _, vm := range d.c.VolumeMounts {
					if vm.Name != "tmp" && !vm.ReadOnly {
						t.Fatalf("mount %s is writable", vm.Name)
					}
				}
			},
		},
		"paused scales to zero": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.Paused = true; m.Spec.Replicas = ptr.To[int32](3) }),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				expect(t, "replicas", *d.Spec.Replicas, int32(0))
			},
		},
		"pod settings": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				m.Spec.Replicas = ptr.To[int32](3)
				m.Spec.DeliveryTimeout = &metav1.Duration{Duration: 10 * time.Second}
				m.Spec.Pod = v1alpha1.MirrorPodSpec{
					Image:              "example.com/custom:1",
					ImagePullPolicy:    corev1.PullAlways,
					Resources:          corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
					NodeSelector:       map[string]string{"pool": "kafka"},
					Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
					PriorityClassName:  "high",
					ServiceAccountName: "mirror-sa",
					Labels:             map[string]string{"team": "data", labelInstance: "hijack"},
					Annotations:        map[string]string{"prometheus.io/scrape": "true"},
				}
			}),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				ps := d.Spec.Template.Spec
				expect(t, "replicas", *d.Spec.Replicas, int32(3))
				expect(t, "image", d.c.Image, "example.com/custom:1")
				expect(t, "pull policy", d.c.ImagePullPolicy, corev1.PullAlways)
				expect(t, "memory", d.c.Resources.Limits.Memory().String(), "512Mi")
				expect(t, "nodeSelector", ps.NodeSelector, map[string]string{"pool": "kafka"})
				expect(t, "tolerations", len(ps.Tolerations), 1)
				expect(t, "priority", ps.PriorityClassName, "high")
				expect(t, "sa", ps.ServiceAccountName, "mirror-sa")
				expect(t, "team label", d.Spec.Template.Labels["team"], "data")
				expect(t, "selector label wins", d.Spec.Template.Labels[labelInstance], "orders")
				expect(t, "annotation", d.Spec.Template.Annotations["prometheus.io/scrape"], "true")
				expect(t, "grace", *ps.TerminationGracePeriodSeconds, int64(40))
			},
		},
		"log level": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.LogLevel = "debug" }),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				expect(t, "args", d.c.Args, []string{"run", "--config", "/etc/kafka-mirror/mirror.yaml", "--log-format", "json", "--log-level", "debug"})
			},
		},
		"fleet pod options": {
			mirror: newMirror(func(m *v1alpha1.KafkaMirror) {
				m.Spec.Pod = v1alpha1.MirrorPodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
						WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelInstance: "orders"}}}},
					Env:          []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}},
					Volumes:      []corev1.Volume{{Name: "extra-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "extra-ca", MountPath: "/etc/ssl/extra", ReadOnly: true}},
					// OpenShift restricted-v2 for this mirror only: no IDs.
					PodSecurityContext:            &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					SecurityContext:               &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					TerminationGracePeriodSeconds: ptr.To[int64](600),
				}
			}),
			check: func(t *testing.T, m *v1alpha1.KafkaMirror, d *deploymentView) {
				ps := d.Spec.Template.Spec
				expect(t, "spread", ps.TopologySpreadConstraints, m.Spec.Pod.TopologySpreadConstraints)
				expect(t, "env", d.c.Env[1:], m.Spec.Pod.Env)
				expect(t, "pod name first", d.c.Env[0].Name+" from "+d.c.Env[0].ValueFrom.FieldRef.FieldPath, podNameEnv+" from metadata.name")
				expect(t, "volumes", d.volumeNames(), []string{"config", "tmp", "extra-ca"})
				expect(t, "extra mount", d.mounts()["extra-ca"], "/etc/ssl/extra")
				expect(t, "config mount kept", d.mounts()["config"], "/etc/kafka-mirror/mirror.yaml")
				expect(t, "pod security", ps.SecurityContext, m.Spec.Pod.PodSecurityContext)
				expect(t, "container security", d.c.SecurityContext, m.Spec.Pod.SecurityContext)
				expect(t, "grace", *ps.TerminationGracePeriodSeconds, int64(600))
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := mirrorDeployment(tc.mirror, testImage, "hash-1")
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("%d containers", len(d.Spec.Template.Spec.Containers))
			}
			tc.check(t, tc.mirror, &deploymentView{Deployment: d, c: &d.Spec.Template.Spec.Containers[0]})
		})
	}
}

func TestServiceAndPDB(t *testing.T) {
	tests := map[string]struct {
		replicas *int32
		paused   bool
		wantPDB  bool
	}{
		"default one replica": {wantPDB: false},
		"two replicas":        {replicas: ptr.To[int32](2), wantPDB: true},
		"zero replicas":       {replicas: ptr.To[int32](0), wantPDB: false},
		"paused with three":   {replicas: ptr.To[int32](3), paused: true, wantPDB: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = tc.replicas; m.Spec.Paused = tc.paused })
			expect(t, "wantsPDB", wantsPDB(m), tc.wantPDB)
			pdb := podDisruptionBudget(m)
			expect(t, "pdb name", pdb.Name, "orders-mirror")
			expect(t, "pdb maxUnavailable", pdb.Spec.MaxUnavailable.IntValue(), 1)
			expect(t, "pdb selector", pdb.Spec.Selector.MatchLabels, selectorLabels(m))
			svc := metricsService(m)
			expect(t, "service name", svc.Name, "orders-mirror-metrics")
			expect(t, "service port", svc.Spec.Ports[0].Port, int32(8080))
			expect(t, "service target", svc.Spec.Ports[0].TargetPort.String(), "metrics")
			expect(t, "service selector", svc.Spec.Selector, selectorLabels(m))
		})
	}
}

func TestSecretFilesHash(t *testing.T) {
	base := secretFiles{"/a": []byte("one"), "/b": []byte("two")}
	tests := map[string]struct {
		files    secretFiles
		wantSame bool
	}{
		"same content":    {secretFiles{"/b": []byte("two"), "/a": []byte("one")}, true},
		"changed value":   {secretFiles{"/a": []byte("one"), "/b": []byte("three")}, false},
		"moved bytes":     {secretFiles{"/a": []byte("onet"), "/b": []byte("wo")}, false},
		"renamed path":    {secretFiles{"/a": []byte("one"), "/c": []byte("two")}, false},
		"one file less":   {secretFiles{"/a": []byte("one")}, false},
		"no files at all": {secretFiles{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			expect(t, "same hash", base.hash() == tc.files.hash(), tc.wantSame)
			expect(t, "same config hash", configHash([]byte("x"), base) == configHash([]byte("x"), tc.files), tc.wantSame)
		})
	}
	if configHash([]byte("x"), base) == configHash([]byte("y"), base) {
		t.Fatal("a config change does not change the hash")
	}
	if _, err := base.read("/missing"); err == nil || !strings.Contains(err.Error(), "/missing") {
		t.Fatalf("reading a missing file: %v", err)
	}
}

func TestConsumerGroup(t *testing.T) {
	tests := map[string]struct {
		mirror *v1alpha1.KafkaMirror
		want   string
	}{
		"default":         {newMirror(), "kafka-mirror.shop.orders"},
		"given":           {newMirror(func(m *v1alpha1.KafkaMirror) { m.Spec.ConsumerGroup = "legacy-mm" }), "legacy-mm"},
		"manifest, no ns": {newMirror(func(m *v1alpha1.KafkaMirror) { m.Namespace = "" }), "kafka-mirror.default.orders"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { expect(t, "group", ConsumerGroup(tc.mirror), tc.want) })
	}
}

func TestSecretNames(t *testing.T) {
	m := newMirror(withSecrets, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLPlain, Username: "u",
			PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "source-creds"}}
	})
	expect(t, "names", secretNames(m), []string{"source-ca", "source-creds", "target-ca", "target-client"})
	expect(t, "none", len(secretNames(newMirror())), 0)
}

// deploymentView gives tests short access to the one container and the volumes.
type deploymentView struct {
	*appsv1.Deployment
	c *corev1.Container
}

func (d *deploymentView) volumeNames() []string {
	var names []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		names = append(names, v.Name)
	}
	return names
}

func (d *deploymentView) volume(name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return &corev1.Volume{}
}

func (d *deploymentView) mounts() map[string]string {
	out := map[string]string{}
	for _, vm := range d.c.VolumeMounts {
		out[vm.Name] = vm.MountPath
	}
	return out
}

func expect[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %#v, want %#v", what, got, want)
	}
}

// TestChildMetadata: spec.childMetadata reaches every object the operator writes, and the
// operator's own labels (which selectors and the Secret index depend on) win.
func TestChildMetadata(t *testing.T) {
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.ChildMetadata = &v1alpha1.ChildMetadata{
			Labels:      map[string]string{"cost-center": "data", labelInstance: "hijack"},
			Annotations: map[string]string{"argocd.argoproj.io/compare-options": "IgnoreExtraneous"},
		}
	})
	for what, meta := range map[string]metav1.ObjectMeta{
		"Deployment":          mirrorDeployment(m, testImage, "h").ObjectMeta,
		"Service":             metricsService(m).ObjectMeta,
		"ConfigMap":           mirrorConfigMap(m, []byte("x")).ObjectMeta,
		"PodDisruptionBudget": podDisruptionBudget(m).ObjectMeta,
	} {
		expect(t, what+" label", meta.Labels["cost-center"], "data")
		expect(t, what+" operator label wins", meta.Labels[labelInstance], "orders")
		expect(t, what+" annotation", meta.Annotations["argocd.argoproj.io/compare-options"], "IgnoreExtraneous")
	}
	// Without it, nothing is added.
	expect(t, "no annotations by default", mirrorDeployment(newMirror(), testImage, "h").Annotations == nil, true)
}

// TestManagedKafkaAuth: OAUTHBEARER's client secret is mounted from its Secret like a
// password and the config names the file; AWS_MSK_IAM needs no Secret (the pod's AWS
// identity signs) and renders the region and role.
func TestManagedKafkaAuth(t *testing.T) {
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLOAuthBearer, OAuth: &v1alpha1.OAuthSpec{
			TokenURL: "https://idp.example/oauth2/token", ClientID: "mirror", Scopes: []string{"kafka"},
			ClientSecretRef: v1alpha1.SecretKeyReference{Name: "idp-client", Key: "secret"},
			Extensions:      map[string]string{"logicalCluster": "lkc-1"},
		}}
		m.Spec.Target.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLAWSMSKIAM,
			AWS: &v1alpha1.AWSSpec{Region: "eu-west-1", RoleARN: "arn:aws:iam::123456789012:role/mirror"}}
	})
	d := mirrorDeployment(m, testImage, "h")
	view := &deploymentView{Deployment: d, c: &d.Spec.Template.Spec.Containers[0]}
	expect(t, "volumes", view.volumeNames(), []string{"config", "tmp", "source-oauth"})
	expect(t, "oauth items", view.volume("source-oauth").Secret.Items, []corev1.KeyToPath{{Key: "secret", Path: "client-secret"}})
	expect(t, "secret names", secretNames(m), []string{"idp-client"})

	cfg := RenderConfig(m)
	expect(t, "source mechanism", cfg.Source.SASL.Mechanism, "OAUTHBEARER")
	expect(t, "oauth", *cfg.Source.SASL.OAuth, config.OAuth{TokenURL: "https://idp.example/oauth2/token", ClientID: "mirror",
		ClientSecretFile: "/etc/kafka-mirror/secrets/source-oauth/client-secret", Scopes: []string{"kafka"},
		Extensions: map[string]string{"logicalCluster": "lkc-1"}})
	expect(t, "aws", *cfg.Target.SASL.AWS, config.AWS{Region: "eu-west-1", RoleARN: "arn:aws:iam::123456789012:role/mirror"})
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the engine rejects the rendered config: %v", err)
	}
}

// TestRenderClientTuning: the producer and consumer tuning reach mirror.yaml, and the
// engine accepts them.
func TestRenderClientTuning(t *testing.T) {
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Producer = &v1alpha1.ProducerSpec{Compression: "zstd", FlushFrequency: &metav1.Duration{Duration: 5 * time.Millisecond}, FlushBytes: 1 << 20, FlushMessages: 1000, Producers: 12, MaxInFlightRequests: 5}
		m.Spec.Consumer = &v1alpha1.ConsumerSpec{FetchMinBytes: 1 << 10, FetchPartitionBytes: 4 << 20, FetchMaxWait: &metav1.Duration{Duration: 200 * time.Millisecond}}
	})
	cfg := RenderConfig(m)
	expect(t, "producer", *cfg.Producer, config.Producer{Compression: "zstd", FlushFrequency: config.Duration{Duration: 5 * time.Millisecond}, FlushBytes: 1 << 20, FlushMessages: 1000, Producers: 12, MaxInFlightRequests: 5})
	expect(t, "batching producers", cfg.BatchProducers(), 12)
	expect(t, "batches in flight per partition", cfg.MaxInFlightRequests(), 5)
	expect(t, "consumer", *cfg.Consumer, config.Consumer{FetchMinBytes: 1 << 10, FetchPartitionBytes: 4 << 20, FetchMaxWait: config.Duration{Duration: 200 * time.Millisecond},
		GroupInstanceID: "${KAFKA_MIRROR_POD_NAME}"})
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the engine rejects the rendered config: %v", err)
	}
}
