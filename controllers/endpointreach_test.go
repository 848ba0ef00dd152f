package controllers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestTokenURLOutsideAllowList: with the bootstrap allow-list admitting the broker, a
// KafkaMirror whose sasl.oauth.tokenUrl names another host:port is Stalled with the field
// path, and the operator never sends the tenant's client credentials there (the endpoint
// counts zero requests) nor writes the mirror's children.
func TestTokenURLOutsideAllowList(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const ns, name = "t-endpoint", "idp"
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "internal detail of someone else's server", http.StatusInternalServerError)
	}))
	defer srv.Close()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idp-client"},
		Data: map[string][]byte{"client-secret": []byte("tenant-client-s3cr3t")}})
	create(t, testMirror(ns, name, `idp\..*`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLOAuthBearer, OAuth: &v1alpha1.OAuthSpec{
			TokenURL: srv.URL + "/oauth2/token", ClientID: "kafka-mirror",
			ClientSecretRef: v1alpha1.SecretKeyReference{Name: "idp-client"},
		}}
	}))
	_, c := waitCondition(t, ns, name, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonEndpointNotAllowed)
	if !strings.Contains(c.Message, "spec.source.sasl.oauth.tokenUrl") || !strings.Contains(c.Message, srv.URL) {
		t.Errorf("Stalled message %q: want the field path and the URL", c.Message)
	}
	// Long enough for a topic sync to have run had it been started.
	time.Sleep(2 * time.Second)
	if n := requests.Load(); n != 0 {
		t.Errorf("the token endpoint outside the allow-list received %d requests", n)
	}
	if err := get(&appsv1.Deployment{}, ns, name+"-mirror"); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was written for a refused token URL (err %v)", err)
	}
}

func TestEndpointAllowList(t *testing.T) {
	tests := map[string]struct {
		servers, endpoints []string
		allowed, refused   []string
	}{
		"no allow-list admits every endpoint": {
			allowed: []string{"https://idp.example/token", "http://10.0.0.1:8080/x"},
		},
		"a bootstrap allow-list alone refuses every endpoint": {
			servers: []string{"*.kafka.svc:9092"},
			refused: []string{"https://idp.example/token"},
		},
		"host with any path, default port": {
			servers: []string{"*.kafka.svc:9092"}, endpoints: []string{"https://idp.example"},
			allowed: []string{"https://idp.example/oauth2/token", "https://IDP.example:443/t?x=1", "https://idp.example"},
			refused: []string{"http://idp.example/token", "https://idp.example:8443/token", "https://idp.example.evil.com/token",
				"https://user:pw@idp.example/token", "https://evil.com/?idp.example", "ftp://idp.example/"},
		},
		"wildcard host and path": {
			endpoints: []string{"https://*.auth.example:*/realms/*/token"},
			allowed:   []string{"https://eu.auth.example/realms/kafka/token", "https://a.auth.example:8443/realms/x/y/token"},
			refused:   []string{"https://auth.example/realms/kafka/token", "https://eu.auth.example/realms/kafka/other", "https://x.auth.example.evil:1/realms/a/token"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := NewBootstrapAllowList(tc.servers)
			if err != nil {
				t.Fatal(err)
			}
			if a, err = a.WithEndpoints(tc.endpoints); err != nil {
				t.Fatal(err)
			}
			for _, u := range tc.allowed {
				if !a.AllowsEndpoint(u) {
					t.Errorf("%q refused, want allowed", u)
				}
			}
			for _, u := range tc.refused {
				if a.AllowsEndpoint(u) {
					t.Errorf("%q allowed, want refused", u)
				}
			}
		})
	}
	for _, p := range []string{"idp.example", "ftp://idp.example", "https://", "https://u@idp.example"} {
		if _, err := (BootstrapAllowList{}).WithEndpoints([]string{p}); err == nil {
			t.Errorf("endpoint pattern %q accepted", p)
		}
	}
}

// TestAssumeRoleRefusedByDefault: the operator does not assume a tenant's roleArn with its
// own AWS identity unless it was started with --allow-assume-role.
func TestAssumeRoleRefusedByDefault(t *testing.T) {
	m := newMirror(func(m *v1alpha1.KafkaMirror) {
		m.Spec.Target.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLAWSMSKIAM,
			AWS: &v1alpha1.AWSSpec{Region: "eu-west-1", RoleARN: "arn:aws:iam::123456789012:role/other-team"}}
	})
	var na *notAllowedError
	err := checkReach(m, BootstrapAllowList{})
	if !errors.As(err, &na) || na.reason != v1alpha1.ReasonAssumeRoleNotAllowed || !strings.Contains(err.Error(), "spec.target.sasl.aws.roleArn") {
		t.Fatalf("checkReach = %v, want AssumeRoleNotAllowed naming spec.target.sasl.aws.roleArn", err)
	}
	if err := checkReach(m, BootstrapAllowList{}.WithAssumeRole(true)); err != nil {
		t.Fatalf("with --allow-assume-role: %v", err)
	}
}
