package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// testPKI is a CA with one server and one client certificate, all PEM.
type testPKI struct {
	caPEM                 []byte
	server                tls.Certificate
	clientCert, clientKey []byte
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafka-mirror test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kDER, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kDER})
	}
	p := &testPKI{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	serverCert, serverKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	if p.server, err = tls.X509KeyPair(serverCert, serverKey); err != nil {
		t.Fatal(err)
	}
	p.clientCert, p.clientKey = issue(3, "mirror", x509.ExtKeyUsageClientAuth)
	return p
}

// TestMutualTLSFromSecrets: the target requires TLS with a client certificate; the
// operator reaches it with the CA and key pair from Secrets, at the paths the pods mount.
func TestMutualTLSFromSecrets(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-tls", "mtls"
	pki := newTestPKI(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	target, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{pki.server},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()

	createTopic(t, kafkaAdmin(t, env.source), "tls.a", 3)
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target-ca"}, Data: map[string][]byte{"ca.crt": pki.caPEM}})
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target-client"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: pki.clientCert, corev1.TLSPrivateKeyKey: pki.clientKey}})
	create(t, testMirror(ns, name, `tls\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target = v1alpha1.ClusterSpec{
			BootstrapServers: target.ListenAddrs(),
			TLS: &v1alpha1.TLSSpec{
				CASecretRef:   &v1alpha1.SecretKeyReference{Name: "target-ca"},
				CertSecretRef: &v1alpha1.CertSecretReference{Name: "target-client"},
			},
		}
	}))
	waitCondition(t, ns, name, v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)

	// Read back through TLS with the same files: the topic exists with the source's count.
	files := secretFiles{
		secretFilePath("target-ca", caFile):     pki.caPEM,
		secretFilePath("target-cert", certFile): pki.clientCert,
		secretFilePath("target-cert", keyFile):  pki.clientKey,
	}
	cfg := RenderConfig(testMirror(ns, name, "x", func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target = v1alpha1.ClusterSpec{BootstrapServers: target.ListenAddrs(), TLS: &v1alpha1.TLSSpec{
			CASecretRef: &v1alpha1.SecretKeyReference{Name: "target-ca"}, CertSecretRef: &v1alpha1.CertSecretReference{Name: "target-client"}}}
	}))
	admin, err := kafka.NewClusterAdmin(cfg.Target, kafka.WithFileReader(files.read))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	got, err := partitions(admin)
	if err != nil || got["tls.a"] != 3 {
		t.Fatalf("TLS target tls.a has %d partitions (err %v), want 3", got["tls.a"], err)
	}

	// Without the client certificate the target refuses, and status says so.
	create(t, testMirror(ns, "no-client-cert", `tls\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target = v1alpha1.ClusterSpec{BootstrapServers: target.ListenAddrs(),
			TLS: &v1alpha1.TLSSpec{CASecretRef: &v1alpha1.SecretKeyReference{Name: "target-ca"}}}
	}))
	_, c := waitCondition(t, ns, "no-client-cert", v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonTargetUnreachable)
	if want := fmt.Sprintf("target cluster [%s]", target.ListenAddrs()[0]); !strings.Contains(c.Message, want) {
		t.Fatalf("message %q does not name the %s", c.Message, want)
	}
	t.Logf("without a client certificate: %s", c.Message)

	t.Run("a Strimzi KafkaUser Secret and a CA rotation with old and new CA", func(t *testing.T) {
		// A KafkaUser Secret has user.crt/user.key and is Opaque; during a rotation the old
		// CA (which signed nothing here) and the new one are both trusted.
		oldCA := newTestPKI(t)
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-ca-old"}, Data: map[string][]byte{"ca.crt": oldCA.caPEM}})
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-ca-new"}, Data: map[string][]byte{"ca-new.crt": pki.caPEM}})
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mirror-user"},
			Data: map[string][]byte{"user.crt": pki.clientCert, "user.key": pki.clientKey, "user.password": []byte("unused")}})
		create(t, testMirror(ns, "strimzi-user", `tls\..*`, func(m *v1alpha1.KafkaMirror) {
			m.Spec.Target = v1alpha1.ClusterSpec{BootstrapServers: target.ListenAddrs(), TLS: &v1alpha1.TLSSpec{
				CASecretRef:   &v1alpha1.SecretKeyReference{Name: "cluster-ca-old"},
				CASecretRefs:  []v1alpha1.SecretKeyReference{{Name: "cluster-ca-new", Key: "ca-new.crt"}},
				CertSecretRef: &v1alpha1.CertSecretReference{Name: "mirror-user", CertKey: "user.crt", KeyKey: "user.key"},
			}}
		}))
		waitCondition(t, ns, "strimzi-user", v1alpha1.ConditionTopicsSynced, metav1.ConditionTrue, v1alpha1.ReasonTopicsInSync)

		// The pods mount the chosen keys under the file names the rendered config reads.
		d, cm := &appsv1.Deployment{}, &corev1.ConfigMap{}
		testutil.Eventually(t, 90*time.Second, func() error {
			if err := get(d, ns, "strimzi-user-mirror"); err != nil {
				return err
			}
			return get(cm, ns, "strimzi-user-mirror-config")
		})
		items := map[string]string{}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				items[v.Name+"/"+it.Path] = v.Secret.SecretName + ":" + it.Key
			}
		}
		expect(t, "target-ca/ca.crt", items["target-ca/ca.crt"], "cluster-ca-old:ca.crt")
		expect(t, "target-ca-1/ca.crt", items["target-ca-1/ca.crt"], "cluster-ca-new:ca-new.crt")
		expect(t, "target-cert/tls.crt", items["target-cert/tls.crt"], "mirror-user:user.crt")
		expect(t, "target-cert/tls.key", items["target-cert/tls.key"], "mirror-user:user.key")
		rendered := cm.Data["mirror.yaml"]
		for _, path := range []string{secretFilePath("target-ca", caFile), secretFilePath("target-ca-1", caFile),
			secretFilePath("target-cert", certFile), secretFilePath("target-cert", keyFile)} {
			if !strings.Contains(rendered, path) {
				t.Errorf("the rendered config does not read %s:\n%s", path, rendered)
			}
		}
		if strings.Contains(rendered, "BEGIN") || strings.Contains(rendered, "unused") {
			t.Errorf("the rendered config holds Secret data:\n%s", rendered)
		}
	})

	t.Run("a refused client certificate reaches status as a cause, never as PEM", func(t *testing.T) {
		// A certificate from another CA: the broker ends the handshake.
		untrusted := newTestPKI(t)
		create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "untrusted-client"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: untrusted.clientCert, corev1.TLSPrivateKeyKey: untrusted.clientKey}})
		create(t, testMirror(ns, "untrusted-cert", `tls\..*`, func(m *v1alpha1.KafkaMirror) {
			m.Spec.Target = v1alpha1.ClusterSpec{BootstrapServers: target.ListenAddrs(), TLS: &v1alpha1.TLSSpec{
				CASecretRef:   &v1alpha1.SecretKeyReference{Name: "target-ca"},
				CertSecretRef: &v1alpha1.CertSecretReference{Name: "untrusted-client"},
			}}
		}))
		_, c := waitCondition(t, ns, "untrusted-cert", v1alpha1.ConditionTopicsSynced, metav1.ConditionFalse, v1alpha1.ReasonTargetUnreachable)
		t.Logf("with an untrusted client certificate: %s", c.Message)

		var mirrors v1alpha1.KafkaMirrorList
		var events eventsv1.EventList
		for _, l := range []client.ObjectList{&mirrors, &events} {
			if err := env.client.List(context.Background(), l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
		}
		places := map[string]string{"logs": env.logs.String()}
		for what, obj := range map[string]any{"KafkaMirrors": mirrors, "events": events} {
			b, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			places[what] = string(b)
		}
		for what, text := range places {
			if strings.Contains(text, "-----BEGIN") {
				t.Errorf("a PEM block appears in the %s", what)
			}
			for _, pemData := range [][]byte{pki.clientCert, pki.clientKey, untrusted.clientCert, untrusted.clientKey} {
				if line := pemBodyLine(pemData); strings.Contains(text, line) {
					t.Errorf("a line of a client certificate or key appears in the %s", what)
				}
			}
		}
	})
}

// pemBodyLine returns the first base64 line of a PEM block: found anywhere, the
// certificate or key has leaked.
func pemBodyLine(data []byte) string {
	lines := strings.Split(string(data), "\n")
	return lines[1]
}
