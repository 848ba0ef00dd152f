package controllers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

func TestMetricsOptions(t *testing.T) {
	plain := metricsOptions(ManagerOptions{MetricsAddress: ":8080"})
	if plain.SecureServing || plain.FilterProvider != nil {
		t.Errorf("SecureMetrics false: secure %v, filter set %v; want plain HTTP without a filter", plain.SecureServing, plain.FilterProvider != nil)
	}
	secure := metricsOptions(ManagerOptions{MetricsAddress: ":8080", SecureMetrics: true, MetricsCertDir: "/certs"})
	if !secure.SecureServing || secure.FilterProvider == nil || secure.CertDir != "/certs" || secure.BindAddress != ":8080" {
		t.Errorf("SecureMetrics true: %+v; want HTTPS with the authn/authz filter and CertDir /certs", secure)
	}
}

// TestSecureMetrics runs a manager with --metrics-secure as a ServiceAccount holding only
// config/rbac's manager and metrics-auth roles, and scrapes it with real ServiceAccount
// tokens from the TokenRequest API: no token is refused (401), a token not bound to
// config/rbac/metrics_reader_role.yaml is forbidden (403), a bound one gets the metrics.
func TestSecureMetrics(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns = "t-metrics"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	// The operator's identity: the generated manager role and the metrics-auth role.
	const operatorSA = "operator"
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: operatorSA, Namespace: ns}}
	managerRole, authRole, readerRole := generatedClusterRoles(t)["kafka-mirror-manager"], &rbacv1.ClusterRole{}, &rbacv1.ClusterRole{}
	managerRole.Name = "t-metrics-" + managerRole.Name
	create(t, managerRole)
	for path, role := range map[string]*rbacv1.ClusterRole{
		"../config/rbac/metrics_auth_role.yaml":   authRole,
		"../config/rbac/metrics_reader_role.yaml": readerRole,
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, role); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// A name of its own: the leader-election test creates config/rbac's roles too.
		role.Name = "t-metrics-" + role.Name
		create(t, role)
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operatorSA}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t-metrics-manager"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerRole.Name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t-metrics-auth"}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: authRole.Name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "t-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole.Name}},
	} {
		create(t, obj)
	}

	asOperator := rest.CopyConfig(env.cfg)
	asOperator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + operatorSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	addr := freeAddress(t)
	mgr, err := NewManager(asOperator, ManagerOptions{
		Image:                        testImage,
		WatchNamespaces:              []string{ns},
		MetricsAddress:               addr,
		SecureMetrics:                true,
		HealthProbeAddress:           "0",
		SkipControllerNameValidation: true,
		Logger:                       newTestLogger(env.logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager failed: %v", err)
		}
	}()

	clientset, err := kubernetes.NewForConfig(env.cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("while requesting a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	// The certificate is self-signed, generated in memory: scrapers skip verification
	// (or are given a CA with --metrics-cert-dir), as kubebuilder's ServiceMonitor does.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed test certificate
	}}
	scrape := func(bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	tests := map[string]struct {
		token string
		// wantCodes: a garbage token makes the TokenReview report an error, which
		// controller-runtime's filter answers with 500 rather than 401; refused either way.
		wantCodes []int
	}{
		"no token":                      {wantCodes: []int{http.StatusUnauthorized}},
		"a token that is not one":       {token: "not-a-token", wantCodes: []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		"a ServiceAccount not bound":    {token: token("stranger"), wantCodes: []int{http.StatusForbidden}},
		"the bound metrics-reader role": {token: token("prometheus"), wantCodes: []int{http.StatusOK}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var code int
			var body string
			// RBAC and the server settle within seconds; the verdict then never changes.
			testutil.Eventually(t, 45*time.Second, func() error {
				var err error
				if code, body, err = scrape(tc.token); err != nil {
					return err
				}
				if !slices.Contains(tc.wantCodes, code) {
					return fmt.Errorf("status %d (%s), want one of %v", code, strings.TrimSpace(body), tc.wantCodes)
				}
				return nil
			})
			hasMetrics := strings.Contains(body, "controller_runtime_reconcile_total")
			if hasMetrics != (code == http.StatusOK) {
				t.Fatalf("status %d, body has controller_runtime_reconcile_total: %v; want metrics exactly with 200:\n%.300s", code, hasMetrics, body)
			}
		})
	}

	t.Run("plain HTTP is not served", func(t *testing.T) {
		resp, err := httpClient.Get("http://" + addr + "/metrics")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("plain HTTP got the metrics")
			}
		}
	})
}

// freeAddress returns a 127.0.0.1 address with a port nothing listens on.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
