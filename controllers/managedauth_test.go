package controllers

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestManagedKafkaAuthRendered: an OAUTHBEARER source and an AWS_MSK_IAM target, applied
// to a real API server, become a ConfigMap that names the client secret's file (never its
// value) and a Deployment that mounts only that Secret key; the admission accepts both.
func TestManagedKafkaAuthRendered(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name, secret = "t-managedauth", "cloud", "idp-client-s3cr3t"
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idp-client"},
		Data: map[string][]byte{"client-secret": []byte(secret), "unrelated": []byte("x")}})
	create(t, testMirror(ns, name, `cloud\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLOAuthBearer, OAuth: &v1alpha1.OAuthSpec{
			TokenURL: "https://idp.example/oauth2/token", ClientID: "kafka-mirror",
			ClientSecretRef: v1alpha1.SecretKeyReference{Name: "idp-client"},
			Extensions:      map[string]string{"logicalCluster": "lkc-1"},
		}}
		m.Spec.Target.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLAWSMSKIAM, AWS: &v1alpha1.AWSSpec{Region: "eu-west-1"}}
	}))
	d, cm := &appsv1.Deployment{}, &corev1.ConfigMap{}
	testutil.Eventually(t, 90*time.Second, func() error {
		if err := get(d, ns, name+"-mirror"); err != nil {
			return err
		}
		return get(cm, ns, name+"-mirror-config")
	})
	rendered := cm.Data["mirror.yaml"]
	if strings.Contains(rendered, secret) {
		t.Fatalf("the ConfigMap holds the client secret:\n%s", rendered)
	}
	cfg, err := config.Parse([]byte(rendered))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "source mechanism", cfg.Source.SASL.Mechanism, "OAUTHBEARER")
	expect(t, "client secret file", cfg.Source.SASL.OAuth.ClientSecretFile, secretFilePath("source-oauth", clientSecretFile))
	expect(t, "extension", cfg.Source.SASL.OAuth.Extensions["logicalCluster"], "lkc-1")
	expect(t, "target region", cfg.Target.SASL.AWS.Region, "eu-west-1")
	var items []corev1.KeyToPath
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "source-oauth" {
			items = v.Secret.Items
		}
	}
	expect(t, "mounted keys", items, []corev1.KeyToPath{{Key: "client-secret", Path: "client-secret"}})
}
