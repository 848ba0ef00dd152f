package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestSecretRefStaysInTheMirrorsNamespace: a KafkaMirror can only name a Secret of its own
// namespace, however it spells the reference, and the operator only ever reads Secrets
// there. The shared test operator may read every Secret of the cluster, and the Secret in
// the other namespace holds the right password for env.secure: had the operator read it,
// the topic sync would succeed.
func TestSecretRefStaysInTheMirrorsNamespace(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, other = "t-secret", "t-secretref-other"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "db-root"},
		Data: map[string][]byte{"password": []byte(securePassword), "tls.crt": []byte("x"), "tls.key": []byte("x")}})

	// mirror is a KafkaMirror in ns whose source SASL password comes from ref, and whose
	// target client certificate from certRef (when given), as a user writes them.
	mirror := func(name string, ref, certRef map[string]any) *unstructured.Unstructured {
		source := map[string]any{"bootstrapServers": toAnySlice(env.secure.ListenAddrs()),
			"sasl": map[string]any{"mechanism": "SCRAM-SHA-512", "username": secureUser, "passwordSecretRef": ref}}
		target := map[string]any{"bootstrapServers": toAnySlice(env.target.ListenAddrs())}
		if certRef != nil {
			target["tls"] = map[string]any{"certSecretRef": certRef}
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "KafkaMirror",
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"source": source, "target": target, "topics": map[string]any{"include": []any{`crossns\..*`}}},
		}}
	}

	t.Run("a namespace field in a Secret reference is refused, or dropped and the own namespace read", func(t *testing.T) {
		ref := map[string]any{"name": "db-root", "namespace": other}
		err := env.client.Create(ctx, mirror("crossns-strict", ref, nil), client.FieldValidation("Strict"))
		if err == nil || !strings.Contains(err.Error(), `unknown field "spec.source.sasl.passwordSecretRef.namespace"`) {
			t.Errorf("creating a KafkaMirror with passwordSecretRef.namespace (strict): %v, want unknown field", err)
		}
		// Without strict validation the API server prunes the field: what is stored, and
		// what the operator reads, is db-root in the KafkaMirror's own namespace.
		create(t, mirror("crossns-pruned", ref, nil))
		m, c := waitCondition(t, ns, "crossns-pruned", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
		expect(t, "Ready message", c.Message, `Secret "db-root" (used by spec.source.sasl.passwordSecretRef) does not exist`)
		expect(t, "stored Secret name", m.Spec.Source.SASL.PasswordSecretRef.Name, "db-root")
	})

	for name, ref := range map[string]string{
		"namespace/name":  other + "/db-root",
		"a relative path": "../" + other + "/secrets/db-root",
		"dot-dot":         "..",
		"a URL escape":    other + "%2Fdb-root",
	} {
		t.Run("a Secret name spelling "+name+" is refused by the API server", func(t *testing.T) {
			err := env.client.Create(ctx, mirror("crossns-name", map[string]any{"name": ref}, nil))
			if err == nil {
				_ = env.client.Delete(ctx, mirror("crossns-name", nil, nil))
				t.Fatalf("a KafkaMirror with passwordSecretRef.name %q was accepted", ref)
			}
			if !strings.Contains(err.Error(), "spec.source.sasl.passwordSecretRef.name") {
				t.Errorf("error %v does not name the field spec.source.sasl.passwordSecretRef.name", err)
			}
			err = env.client.Create(ctx, mirror("crossns-cert", map[string]any{"name": "creds"}, map[string]any{"name": ref}))
			if err == nil {
				_ = env.client.Delete(ctx, mirror("crossns-cert", nil, nil))
				t.Fatalf("a KafkaMirror with tls.certSecretRef.name %q was accepted", ref)
			}
			if !strings.Contains(err.Error(), "spec.target.tls.certSecretRef.name") {
				t.Errorf("error %v does not name the field spec.target.tls.certSecretRef.name", err)
			}
		})
	}
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
