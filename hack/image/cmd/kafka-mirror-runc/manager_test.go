package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// What the chart gives the operator pod (charts/kafka-mirror-operator/templates/deployment.yaml).
const (
	operatorNamespace = "kafka-mirror-system"
	mirrorNamespace   = "team-a"
	leaseName         = "kafka-mirror-operator.kafkamirror.io"
	engineImage       = "ghcr.io/kafka-mirror/kafka-mirror:runc-test"
	// terminationGracePeriodSeconds in the chart: the kubelet kills the operator after it.
	operatorGrace = 10 * time.Second
	// Generous ceilings for a busy 2-core machine.
	operatorReadyCeiling = 2 * time.Minute
	operatorExitCeiling  = 3 * operatorGrace
)

// TestRuncManager runs the operator (`kafka-mirror manager`, with the chart's arguments)
// in the container against an envtest API server, as the chart's Deployment runs it but
// for the network namespace: the same securityContext, so a read-only root file system
// that the in-memory metrics certificate and leader election must live with. It checks
// /readyz, the HTTPS /metrics refusing an anonymous client, a KafkaMirror reconciled into
// its Deployment with the engine image, the Lease held, and on SIGTERM exit code 0 within
// the chart's grace period with the Lease released.
func TestRuncManager(t *testing.T) {
	liveRunc(t)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set (make image-run sets it from hack/envtest.sh)")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../../../../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "kafka-mirror-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := crclient.New(cfg, crclient.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{operatorNamespace, mirrorNamespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := newCluster(t), newCluster(t)

	dir := t.TempDir()
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(dir, "operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(wrapper(t), "manager", "--leader-elect=true", "--metrics-bind-address="+metricsAddr,
		"--metrics-secure=true", "--health-probe-bind-address="+probeAddr, "--engine-image="+engineImage,
		"--leader-election-namespace="+operatorNamespace, "--kubeconfig", kubeconfigPath, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("kafka-mirror-%d", cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = exec.Command("runc", "--root", runcRoot(), "delete", "--force", id).Run()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("operator log:\n%s", tail(log, 40))
		}
	})

	waitFor(t, operatorReadyCeiling, exited, "the operator's /readyz to answer 200", func() bool {
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	checkSecurityContext(t, containerPid(t, id))

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	// The metrics server starts next to the probes, not before them: wait for it too.
	var metricsStatus int
	waitFor(t, operatorReadyCeiling, exited, "answer from the HTTPS /metrics", func() bool {
		resp, err := insecure.Get("https://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		metricsStatus = resp.StatusCode
		return true
	})
	if metricsStatus != http.StatusUnauthorized && metricsStatus != http.StatusForbidden {
		t.Errorf("the HTTPS /metrics answered an anonymous client with %d, want 401 or 403", metricsStatus)
	}

	km := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kafkamirror.io/v1alpha1",
		"kind":       "KafkaMirror",
		"metadata":   map[string]any{"name": "orders", "namespace": mirrorNamespace},
		"spec": map[string]any{
			"source": map[string]any{"bootstrapServers": []any{src.ListenAddrs()[0]}},
			"target": map[string]any{"bootstrapServers": []any{dst.ListenAddrs()[0]}},
			"topics": map[string]any{"include": []any{`runc\..*`}},
		},
	}}
	if err := c.Create(ctx, km); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	waitFor(t, operatorReadyCeiling, exited, "the KafkaMirror's Deployment", func() bool {
		return c.Get(ctx, crclient.ObjectKey{Namespace: mirrorNamespace, Name: "orders-mirror"}, &dep) == nil
	})
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != engineImage {
		t.Errorf("the mirror Deployment runs %q, want the --engine-image %q", img, engineImage)
	}
	var lease coordinationv1.Lease
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, &lease); err != nil {
		t.Fatalf("the operator holds no Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("the Lease has no holder while the operator runs")
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if code := cmd.ProcessState.ExitCode(); err != nil || code != 0 {
			t.Fatalf("after SIGTERM the operator exited with %v (code %d), want 0", err, code)
		}
	case <-time.After(operatorExitCeiling):
		t.Fatalf("the operator did not exit within %v of SIGTERM", operatorExitCeiling)
	}
	took := time.Since(start)
	if took > operatorGrace {
		t.Errorf("the operator took %v to exit after SIGTERM; the chart's grace period is %v, after which the kubelet kills it", took, operatorGrace)
	}
	if err := c.Get(ctx, crclient.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %q after the operator stopped, want released", *lease.Spec.HolderIdentity)
	}
	t.Logf("the operator in the container: ready, HTTPS /metrics answered %d to an anonymous client, reconciled a KafkaMirror into its Deployment, exited 0 %v after SIGTERM, Lease released", metricsStatus, took.Round(time.Millisecond))
}

// waitFor polls cond until it holds, failing the test after ceiling or if the container exits.
func waitFor(t *testing.T, ceiling time.Duration, exited <-chan error, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ceiling)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, ceiling)
		}
		select {
		case err := <-exited:
			t.Fatalf("the container exited (%v) while waiting for %s", err, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
