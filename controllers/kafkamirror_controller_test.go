package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// testSyncInterval is the tests' topicSyncInterval: short, so that "within one sync
// interval" is a few seconds.
const testSyncInterval = 2 * time.Second

// testMirror mirrors the topics matching include from env.source to env.target.
func testMirror(ns, name, include string, mutate ...func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source:            v1alpha1.ClusterSpec{BootstrapServers: env.source.ListenAddrs()},
			Target:            v1alpha1.ClusterSpec{BootstrapServers: env.target.ListenAddrs()},
			Topics:            v1alpha1.TopicsSpec{Include: []string{include}},
			TopicSyncInterval: &metav1.Duration{Duration: testSyncInterval},
		},
	}
	for _, f := range mutate {
		f(m)
	}
	return m
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("while creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(obj client.Object, ns, name string) error {
	return env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// mirrorCondition fetches m and returns its condition of type typ.
func mirrorCondition(ns, name, typ string) (*v1alpha1.KafkaMirror, *metav1.Condition, error) {
	m := &v1alpha1.KafkaMirror{}
	if err := get(m, ns, name); err != nil {
		return nil, nil, err
	}
	c := meta.FindStatusCondition(m.Status.Conditions, typ)
	if c == nil {
		return m, nil, fmt.Errorf("no %s condition yet; conditions: %+v", typ, m.Status.Conditions)
	}
	if c.ObservedGeneration != m.Generation {
		return m, c, fmt.Errorf("%s condition is for generation %d, the object is at %d", typ, c.ObservedGeneration, m.Generation)
	}
	return m, c, nil
}

// waitCondition waits until condition typ has status and reason, and returns the
// KafkaMirror and the condition.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) (*v1alpha1.KafkaMirror, *metav1.Condition) {
	t.Helper()
	var m *v1alpha1.KafkaMirror
	var c *metav1.Condition
	testutil.Eventually(t, 90*time.Second, func() error {
		var err error
		if m, c, err = mirrorCondition(ns, name, typ); err != nil {
			return err
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s is %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	})
	return m, c
}

// markDeploymentReady plays the Deployment controller, which envtest does not run:
// every wanted replica is up to date, ready and available.
func markDeploymentReady(t *testing.T, ns, name string) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, name); err != nil {
			return err
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		return env.client.Status().Update(context.Background(), d)
	})
}

func TestMirrorLifecycle(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-basic", "basic"
	src, tgt := kafkaAdmin(t, env.source), kafkaAdmin(t, env.target)
	createTopic(t, src, "basic.a", 3)
	createTopic(t, src, "basic.b", 5)
	createTopic(t, src, "other.x", 2)
	create(t, testMirror(ns, name, `basic\..*`))

	// The children exist with the right content.
	d, cm, svc := &appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}
	testutil.Eventually(t, 90*time.Second, func() error {
		for obj, n := range map[client.Object]string{d: "basic-mirror", cm: "basic-mirror-config", svc: "basic-mirror-metrics"} {
			if err := get(obj, ns, n); err != nil {
				return err
			}
		}
		return nil
	})
	c := d.Spec.Template.Spec.Containers[0]
	expect(t, "image", c.Image, testImage)
	expect(t, "args", c.Args, []string{"run", "--config", "/etc/kafka-mirror/mirror.yaml", "--log-format", "json"})
	expect(t, "replicas", *d.Spec.Replicas, int32(1))
	expect(t, "owner", d.OwnerReferences[0].Kind+"/"+d.OwnerReferences[0].Name, "KafkaMirror/basic")
	expect(t, "service owner", svc.OwnerReferences[0].Name, "basic")
	expect(t, "service port", svc.Spec.Ports[0].Port, int32(8080))
	if len(d.Spec.Template.Annotations[ConfigHashAnnotation]) != 32 {
		t.Fatalf("pod template hash annotation = %q", d.Spec.Template.Annotations[ConfigHashAnnotation])
	}
	// Contract: the engine loads the ConfigMap's mirror.yaml with its own loader.
	cfg, err := config.Parse([]byte(cm.Data["mirror.yaml"]))
	if err != nil {
		t.Fatalf("the engine rejects the ConfigMap's mirror.yaml: %v", err)
	}
	expect(t, "consumer group", cfg.ConsumerGroup, "kafka-mirror.t-basic.basic")
	expect(t, "source", cfg.Source.BootstrapServers, env.source.ListenAddrs())
	expect(t, "syncTopics", cfg.SyncTopicsEnabled(), false)

	// Target topics are created with the source's partition counts, and only matching ones.
	testutil.Eventually(t, 60*time.Second, func() error {
		got, err := partitions(tgt)
		if err != nil {
			return err
		}
		if got["basic.a"] != 3 || got["basic.b"] != 5 {
			return fmt.Errorf("target partitions %v, want basic.a=3 basic.b=5", got)
		}
		if _, ok := got["other.x"]; ok {
			return fmt.Errorf("other.x was mirrored although it does not match")
		}
		return nil
	})

	// Status: topics in sync, not ready until the pods are.
	m, _ := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)
	expect(t, "topic summary", [3]int32{m.Status.Topics.Selected, m.Status.Topics.InSync, m.Status.Topics.Mismatched}, [3]int32{2, 2, 0})
	expect(t, "topic items", topicCounts(m), map[string][2]int32{"basic.a": {3, 3}, "basic.b": {5, 5}})
	expect(t, "consumer group in status", m.Status.ConsumerGroup, "kafka-mirror.t-basic.basic")
	expect(t, "selector", m.Status.Selector, "app.kubernetes.io/instance=basic,app.kubernetes.io/name=kafka-mirror")
	// Observed replicas: envtest runs no Deployment controller, so no pod exists yet.
	expect(t, "status replicas", m.Status.Replicas, int32(0))
	if lag := m.Status.Topics.Items[0].Lag; lag == nil || *lag != 0 {
		t.Fatalf("lag of an empty topic = %v, want 0", lag)
	}
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentNotReady)
	waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing)

	// Ready once the Deployment is available; observedGeneration follows.
	markDeploymentReady(t, ns, "basic-mirror")
	m, _ = waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonAvailable)
	waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
	expect(t, "observedGeneration", m.Status.ObservedGeneration, m.Generation)
	expect(t, "readyReplicas", m.Status.ReadyReplicas, int32(1))

	t.Run("reconciling again writes nothing", func(t *testing.T) {
		before := resourceVersions(t, ns, name)
		time.Sleep(2*testSyncInterval + time.Second) // at least two periodic reconciles
		expect(t, "resourceVersions", resourceVersions(t, ns, name), before)
	})

	t.Run("source expansion reaches the target within one sync interval", func(t *testing.T) {
		if err := src.CreatePartitions("basic.a", 6, nil, false); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, testSyncInterval+3*time.Second, func() error {
			got, err := partitions(tgt)
			if err != nil || got["basic.a"] != 6 {
				return fmt.Errorf("target basic.a has %d partitions (err %v), want 6", got["basic.a"], err)
			}
			return nil
		})
		testutil.Eventually(t, 90*time.Second, func() error {
			m := &v1alpha1.KafkaMirror{}
			if err := get(m, ns, name); err != nil {
				return err
			}
			if got := topicCounts(m)["basic.a"]; got != [2]int32{6, 6} {
				return fmt.Errorf("status says basic.a %v", got)
			}
			return nil
		})
	})

	t.Run("a new matching topic appears on the target", func(t *testing.T) {
		createTopic(t, src, "basic.c", 4)
		testutil.Eventually(t, testSyncInterval+3*time.Second, func() error {
			got, err := partitions(tgt)
			if err != nil || got["basic.c"] != 4 {
				return fmt.Errorf("target basic.c has %d partitions (err %v), want 4", got["basic.c"], err)
			}
			return nil
		})
	})

	t.Run("a target with more partitions is reported, not changed", func(t *testing.T) {
		createTopic(t, tgt, "basic.d", 4)
		createTopic(t, src, "basic.d", 2)
		m, c := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTargetHasMorePartitions)
		if !strings.Contains(c.Message, "basic.d") {
			t.Fatalf("message %q does not name basic.d", c.Message)
		}
		expect(t, "mismatched", m.Status.Topics.Mismatched, int32(1))
		expect(t, "basic.d counts", topicCounts(m)["basic.d"], [2]int32{2, 4})
		got, err := partitions(tgt)
		if err != nil || got["basic.d"] != 4 {
			t.Fatalf("target basic.d has %d partitions (err %v), want it left at 4", got["basic.d"], err)
		}
	})

	t.Run("an edited Deployment is restored", func(t *testing.T) {
		testutil.Eventually(t, 90*time.Second, func() error {
			d := &appsv1.Deployment{}
			if err := get(d, ns, "basic-mirror"); err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = "example.com/tampered:1"
			d.Spec.Replicas = ptr.To[int32](7)
			return env.client.Update(context.Background(), d)
		})
		testutil.Eventually(t, 45*time.Second, func() error {
			d := &appsv1.Deployment{}
			if err := get(d, ns, "basic-mirror"); err != nil {
				return err
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != testImage || *d.Spec.Replicas != 1 {
				return fmt.Errorf("image %s replicas %d, want %s and 1", img, *d.Spec.Replicas, testImage)
			}
			return nil
		})
	})

	t.Run("deleted children are restored", func(t *testing.T) {
		for obj, n := range map[client.Object]string{&appsv1.Deployment{}: "basic-mirror", &corev1.ConfigMap{}: "basic-mirror-config", &corev1.Service{}: "basic-mirror-metrics"} {
			if err := get(obj, ns, n); err != nil {
				t.Fatal(err)
			}
			uid := obj.GetUID()
			if err := env.client.Delete(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 45*time.Second, func() error {
				if err := get(obj, ns, n); err != nil {
					return err
				}
				if obj.GetUID() == uid {
					return fmt.Errorf("%T %s not deleted yet", obj, n)
				}
				return nil
			})
		}
	})
	t.Run("deleting the KafkaMirror leaves the target topics", func(t *testing.T) {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			t.Fatal(err)
		}
		if err := env.client.Delete(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 90*time.Second, func() error {
			if err := get(m, ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (err %v)", err)
			}
			return nil
		})
		time.Sleep(testSyncInterval) // a reconcile that would do harm has had its chance
		got, err := partitions(tgt)
		if err != nil {
			t.Fatal(err)
		}
		for topic, n := range map[string]int32{"basic.a": 6, "basic.b": 5, "basic.c": 4} {
			if got[topic] != n {
				t.Errorf("target %s has %d partitions after the KafkaMirror was deleted, want %d", topic, got[topic], n)
			}
		}
	})
}

// topicCounts maps each source topic in status to its source and target partitions.
func topicCounts(m *v1alpha1.KafkaMirror) map[string][2]int32 {
	out := map[string][2]int32{}
	if m.Status.Topics == nil {
		return out
	}
	for _, it := range m.Status.Topics.Items {
		out[it.Source] = [2]int32{it.SourcePartitions, it.TargetPartitions}
	}
	return out
}

// resourceVersions of a KafkaMirror and its children.
func resourceVersions(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for kind, o := range map[string]struct {
		obj  client.Object
		name string
	}{
		"KafkaMirror": {&v1alpha1.KafkaMirror{}, name},
		"Deployment":  {&appsv1.Deployment{}, name + "-mirror"},
		"ConfigMap":   {&corev1.ConfigMap{}, name + "-mirror-config"},
		"Service":     {&corev1.Service{}, name + "-mirror-metrics"},
	} {
		if err := get(o.obj, ns, o.name); err != nil {
			t.Fatal(err)
		}
		out[kind] = o.obj.GetResourceVersion()
	}
	return out
}

func TestScaleAndPause(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-scale", "scaled"
	create(t, testMirror(ns, name, `scale\..*`))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonNoTopicsSelected)

	// kubectl scale goes through the scale subresource.
	m := &v1alpha1.KafkaMirror{}
	if err := get(m, ns, name); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{}
	if err := env.client.SubResource("scale").Get(context.Background(), m, scale); err != nil {
		t.Fatalf("scale subresource: %v", err)
	}
	expect(t, "scale replicas", scale.Spec.Replicas, int32(1))
	scale.Spec.Replicas = 3
	if err := env.client.SubResource("scale").Update(context.Background(), m, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scaling: %v", err)
	}
	testutil.Eventually(t, 45*time.Second, func() error {
		d, pdb := &appsv1.Deployment{}, &policyv1.PodDisruptionBudget{}
		if err := get(d, ns, "scaled-mirror"); err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("deployment replicas %d, want 3", *d.Spec.Replicas)
		}
		return get(pdb, ns, "scaled-mirror")
	})
	markDeploymentReady(t, ns, "scaled-mirror") // the scale status reports observed pods
	testutil.Eventually(t, 90*time.Second, func() error {
		scale := &autoscalingv1.Scale{}
		if err := env.client.SubResource("scale").Get(context.Background(), m, scale); err != nil {
			return err
		}
		if scale.Status.Replicas != 3 || scale.Status.Selector != "app.kubernetes.io/instance=scaled,app.kubernetes.io/name=kafka-mirror" {
			return fmt.Errorf("scale status %+v", scale.Status)
		}
		return nil
	})

	// A deleted budget comes back.
	pdb := &policyv1.PodDisruptionBudget{}
	if err := get(pdb, ns, "scaled-mirror"); err != nil {
		t.Fatal(err)
	}
	uid := pdb.UID
	if err := env.client.Delete(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 45*time.Second, func() error {
		if err := get(pdb, ns, "scaled-mirror"); err != nil {
			return err
		}
		if pdb.UID == uid {
			return fmt.Errorf("not deleted yet")
		}
		return nil
	})

	// Paused: scaled to 0, no budget, not Ready.
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(m, ns, name); err != nil {
			return err
		}
		m.Spec.Paused = true
		return env.client.Update(context.Background(), m)
	})
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPaused)
	testutil.Eventually(t, 45*time.Second, func() error {
		d := &appsv1.Deployment{}
		if err := get(d, ns, "scaled-mirror"); err != nil {
			return err
		}
		if *d.Spec.Replicas != 0 {
			return fmt.Errorf("deployment replicas %d, want 0", *d.Spec.Replicas)
		}
		if err := get(&policyv1.PodDisruptionBudget{}, ns, "scaled-mirror"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the PodDisruptionBudget still exists (err %v)", err)
		}
		return nil
	})
}

func TestSecretsAndCredentials(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-secret", "secure"
	const wrongPassword = "Wr0ng-But-Also-Secret-Pw"
	createTopic(t, kafkaAdmin(t, env.secure), "secret.a", 2)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"password": []byte(securePassword)}}
	create(t, secret)
	create(t, testMirror(ns, name, `secret\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source = v1alpha1.ClusterSpec{
			BootstrapServers: env.secure.ListenAddrs(),
			SASL: &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: secureUser,
				PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}},
		}
	}))

	// The operator authenticates with the Secret's password, served at the path the pods mount.
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)
	got, err := partitions(kafkaAdmin(t, env.target))
	if err != nil || got["secret.a"] != 2 {
		t.Fatalf("target secret.a has %d partitions (err %v), want 2", got["secret.a"], err)
	}
	d := &appsv1.Deployment{}
	if err := get(d, ns, "secure-mirror"); err != nil {
		t.Fatal(err)
	}
	hash := d.Spec.Template.Annotations[ConfigHashAnnotation]
	vol := d.Spec.Template.Spec.Volumes[2]
	expect(t, "secret volume", [2]string{vol.Name, vol.Secret.SecretName}, [2]string{"source-sasl", "creds"})

	// A changed Secret rolls the pods; a wrong password is reported with its cause.
	secret.Data["password"] = []byte(wrongPassword)
	if err := env.client.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 45*time.Second, func() error {
		if err := get(d, ns, "secure-mirror"); err != nil {
			return err
		}
		if d.Spec.Template.Annotations[ConfigHashAnnotation] == hash {
			return fmt.Errorf("the pod template hash did not change after the Secret changed")
		}
		return nil
	})
	_, c := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonSourceUnreachable)
	if !strings.Contains(c.Message, "SASL") || !strings.Contains(c.Message, env.secure.ListenAddrs()[0]) {
		t.Fatalf("message %q does not name the cluster and the SASL failure", c.Message)
	}
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTopicsNotSynced)

	// A deleted Secret is reported and does not roll the pods: they keep what they mounted.
	if err := get(d, ns, "secure-mirror"); err != nil {
		t.Fatal(err)
	}
	hash = d.Spec.Template.Annotations[ConfigHashAnnotation]
	if err := env.client.Delete(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	time.Sleep(testSyncInterval)
	if err := get(d, ns, "secure-mirror"); err != nil || d.Spec.Template.Annotations[ConfigHashAnnotation] != hash {
		t.Fatalf("the pods would roll while the Secret is missing (hash %s -> %s, err %v)", hash, d.Spec.Template.Annotations[ConfigHashAnnotation], err)
	}

	// A missing Secret is reported; creating it lets the mirror go on (the Secret poller).
	create(t, testMirror(ns, "later", `secret\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source = v1alpha1.ClusterSpec{
			BootstrapServers: env.secure.ListenAddrs(),
			SASL: &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: secureUser,
				PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "later-creds", Key: "pw"}},
		}
	}))
	_, c = waitCondition(t, ns, "later", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	expect(t, "missing secret message", c.Message, `Secret "later-creds" (used by spec.source.sasl.passwordSecretRef) does not exist`)
	if err := get(&appsv1.Deployment{}, ns, "later-mirror"); err != nil {
		t.Fatalf("the Deployment is written even while a Secret is missing: %v", err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later-creds"}, Data: map[string][]byte{"pw": []byte(securePassword)}})
	waitCondition(t, ns, "later", v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)

	t.Run("credentials never appear in ConfigMaps, status, events or logs", func(t *testing.T) {
		var events eventsv1.EventList
		testutil.Eventually(t, 45*time.Second, func() error {
			if err := env.client.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(events.Items) < 2 {
				return fmt.Errorf("%d events so far", len(events.Items))
			}
			return nil
		})
		var mirrors v1alpha1.KafkaMirrorList
		var cms corev1.ConfigMapList
		for _, l := range []client.ObjectList{&mirrors, &cms} {
			if err := env.client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
		}
		places := map[string]string{"logs": env.logs.String()}
		for what, obj := range map[string]any{"KafkaMirrors": mirrors, "ConfigMaps": cms, "events": events} {
			b, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			places[what] = string(b)
		}
		if !strings.Contains(places["ConfigMaps"], "/etc/kafka-mirror/secrets/source-sasl/password") {
			t.Fatal("the ConfigMaps do not name the password file; is this the right namespace?")
		}
		for what, text := range places {
			for _, pw := range []string{securePassword, wrongPassword} {
				if strings.Contains(text, pw) {
					t.Errorf("a password appears in the %s", what)
				}
			}
		}
	})
}

func TestUnreachableClusters(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-unreachable"
	// Nothing listens on port 1: the connection is refused at once.
	create(t, testMirror(ns, "no-source", `.*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.BootstrapServers = []string{"127.0.0.1:1"}
	}))
	create(t, testMirror(ns, "no-target", `.*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target.BootstrapServers = []string{"127.0.0.1:1"}
	}))
	for name, want := range map[string]string{"no-source": v1alpha1.ReasonSourceUnreachable, "no-target": v1alpha1.ReasonTargetUnreachable} {
		m, c := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, want)
		if !strings.Contains(c.Message, "127.0.0.1:1") {
			t.Errorf("%s: message %q does not name the unreachable address", name, c.Message)
		}
		waitCondition(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTopicsNotSynced)
		waitCondition(t, ns, name, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing)
		// The mirror itself is still deployed: the engine retries on its own.
		if err := get(&appsv1.Deployment{}, ns, name+"-mirror"); err != nil {
			t.Errorf("%s: no Deployment while Kafka is unreachable: %v", name, err)
		}
		if m.Status.ObservedGeneration != 0 {
			t.Errorf("%s: observedGeneration %d moved although the reconcile failed", name, m.Status.ObservedGeneration)
		}
	}
}

func TestInvalidSpecStalls(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns = "t-invalid"
	tests := map[string]struct {
		mutate   func(*v1alpha1.KafkaMirror)
		wantPath string
	}{
		"regex that does not compile": {
			mutate:   func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Exclude = []string{"ok", "orders("} },
			wantPath: "spec.topics.exclude[1]: Invalid value: \"orders(\": error parsing regexp",
		},
		"CEL filter that does not compile": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{Filter: "record.value +"}}}
			},
			wantPath: "spec.handlers[0].cel.filter",
		},
		"unknown named handler": {
			mutate:   func(m *v1alpha1.KafkaMirror) { m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "no-such-handler"}} },
			wantPath: "spec.handlers[0].name",
		},
		"unknown rebalance listener": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.RebalanceListener = &v1alpha1.PluginSpec{Name: "no-such-listener"}
			},
			wantPath: "spec.rebalanceListener.name",
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		mname := fmt.Sprintf("invalid-%d", i)
		t.Run(name, func(t *testing.T) {
			create(t, testMirror(ns, mname, `invalid\..*`, tc.mutate))
			m, c := waitCondition(t, ns, mname, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
			if !strings.Contains(c.Message, tc.wantPath) {
				t.Fatalf("Stalled message %q does not contain %q", c.Message, tc.wantPath)
			}
			// Stalled is the outcome of this generation, so kstatus can trust it.
			expect(t, "observedGeneration", m.Status.ObservedGeneration, m.Generation)
			waitCondition(t, ns, mname, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec)
			if err := get(&appsv1.Deployment{}, ns, mname+"-mirror"); !apierrors.IsNotFound(err) {
				t.Fatalf("a Deployment exists for an invalid spec (err %v)", err)
			}
		})
	}

	t.Run("fixing the spec clears Stalled", func(t *testing.T) {
		create(t, testMirror(ns, "fixed", `invalid(`))
		waitCondition(t, ns, "fixed", v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidSpec)
		testutil.Eventually(t, 90*time.Second, func() error {
			m := &v1alpha1.KafkaMirror{}
			if err := get(m, ns, "fixed"); err != nil {
				return err
			}
			m.Spec.Topics.Include = []string{`invalid\..*`}
			return env.client.Update(context.Background(), m)
		})
		waitCondition(t, ns, "fixed", v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled)
		testutil.Eventually(t, 90*time.Second, func() error { return get(&appsv1.Deployment{}, ns, "fixed-mirror") })
	})
}

func TestSyncPartitionsDisabled(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-nosync", "nosync"
	createTopic(t, kafkaAdmin(t, env.source), "nosync.a", 3)
	create(t, testMirror(ns, name, `nosync\..*`, func(m *v1alpha1.KafkaMirror) { m.Spec.SyncPartitions = ptr.To(false) }))
	m, c := waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonTopicSyncDisabled)
	if !strings.Contains(c.Message, "nosync.a") {
		t.Fatalf("message %q does not name the topic", c.Message)
	}
	expect(t, "items", len(m.Status.Topics.Items), 1)
	expect(t, "state", m.Status.Topics.Items[0].State, v1alpha1.TopicStateMissing)
	expect(t, "mismatched", m.Status.Topics.Mismatched, int32(1))
	got, err := partitions(kafkaAdmin(t, env.target))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["nosync.a"]; ok {
		t.Fatal("the target topic was created although syncPartitions is false")
	}
}
