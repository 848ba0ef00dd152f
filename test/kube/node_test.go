//go:build kube

package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
)

// Ceilings, generous for a busy 2-core machine (3x what a quiet run takes or more).
const (
	installTimeout = 5 * time.Minute // helm install, pods pulled from the local store and ready
	readyTimeout   = 5 * time.Minute // a KafkaMirror Ready, a rollout finished
	auditTimeout   = 3 * time.Minute // the target holding every acknowledged record
	cmdTimeout     = 6 * time.Minute // any one kubectl or helm command
)

// The mirror's settings that bound what a forced kill may duplicate.
const (
	feedRate             = 1000 // records per second over all partitions
	partitionsPerTopic   = 4
	maxInFlight          = 500 // spec.maxInFlightPerPartition
	offsetCommitInterval = time.Second
)

var (
	topics = map[string]int32{"orders.a": partitionsPerTopic, "orders.b": partitionsPerTopic}
	// totalPartitions is the number of source partitions of topics.
	totalPartitions = 2 * partitionsPerTopic
)

const (
	namespace         = "team-a"
	operatorNamespace = "kafka-mirror-system"
	release           = "kafka-mirror-operator"
	mirrorName        = "orders"
)

// env is what make e2e-kube hands the test.
type env struct {
	kubectl, helm, root, nodeIP, image string
}

func loadEnv(t *testing.T) env {
	t.Helper()
	e := env{
		kubectl: os.Getenv("KUBECTL"), helm: os.Getenv("HELM"), root: os.Getenv("REPO_ROOT"),
		nodeIP: os.Getenv("KUBE_NODE_IP"), image: os.Getenv("KAFKA_MIRROR_IMAGE"),
	}
	if e.kubectl == "" || e.helm == "" || e.root == "" || e.nodeIP == "" || e.image == "" || os.Getenv("KUBECONFIG") == "" {
		t.Skip("run through make e2e-kube (needs KUBECTL, HELM, REPO_ROOT, KUBE_NODE_IP, KAFKA_MIRROR_IMAGE, KUBECONFIG)")
	}
	return e
}

// run runs a command with a timeout and returns its standard output; it fails the test
// with the command's standard error when the command fails.
func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := tryRun(stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return out
}

func tryRun(stdin string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (e env) kc(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, "", e.kubectl, args...)
}

func (e env) apply(t *testing.T, yaml string) {
	t.Helper()
	run(t, yaml, e.kubectl, "apply", "-f", "-")
}

// imageRepoTag splits the image reference into repository and tag.
func (e env) imageRepoTag() (string, string) {
	i := strings.LastIndex(e.image, ":")
	return e.image[:i], e.image[i+1:]
}

// cluster is a kfake cluster listening on the node's address, which the pods reach
// through the pod bridge's gateway.
type cluster struct {
	kf    *kfake.Cluster
	addrs []string
}

func newCluster(t *testing.T, nodeIP string, opts ...kfake.Opt) *cluster {
	t.Helper()
	listen := func(network, _ string) (net.Listener, error) {
		return net.Listen(network, net.JoinHostPort(nodeIP, "0"))
	}
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.ListenFn(listen)}, opts...)...)
	if err != nil {
		t.Fatalf("starting a kfake cluster on %s: %v", nodeIP, err)
	}
	t.Cleanup(kf.Close)
	return &cluster{kf: kf, addrs: kf.ListenAddrs()}
}

func (c *cluster) createTopics(t *testing.T, ts map[string]int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for name, n := range ts {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("creating topics: %v", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("creating topic %s: %v", rt.Topic, err)
		}
	}
}

// feed writes the counted workload into the source at feedRate in one-second chunks, each
// a separate audit.Produce run, until stopped; every acknowledged record is kept.
type feed struct {
	src    []string
	mu     sync.Mutex
	all    *audit.Produced
	chunks int
	stop   chan struct{}
	done   chan struct{}
	err    error
}

func newFeed(src []string) *feed {
	return &feed{src: src, all: &audit.Produced{}}
}

// chunk writes n records at feedRate as one run.
func (f *feed) chunk(ctx context.Context, n int) error {
	f.mu.Lock()
	f.chunks++
	i := f.chunks
	f.mu.Unlock()
	p, err := audit.Produce(ctx, f.src, audit.Workload{
		Topics: topics, Records: n, Rate: feedRate, Seed: int64(i), Run: fmt.Sprintf("c%d", i), NullFraction: 0.05,
	}, nil)
	if err != nil {
		return err
	}
	if p.Failed > 0 {
		return fmt.Errorf("the source did not acknowledge %d records: %v", p.Failed, p.FirstError)
	}
	f.mu.Lock()
	f.all.Merge(p)
	f.mu.Unlock()
	return nil
}

// start writes chunks in the background until stopAndWait.
func (f *feed) start() {
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			if err := f.chunk(context.Background(), feedRate); err != nil {
				f.err = err
				return
			}
		}
	}()
}

func (f *feed) stopAndWait(t *testing.T) {
	t.Helper()
	close(f.stop)
	<-f.done
	if f.err != nil {
		t.Fatalf("writing the workload: %v", f.err)
	}
}

func (f *feed) produced() *audit.Produced {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &audit.Produced{}
	p.Merge(f.all)
	return p
}

// auditAll waits until the target holds every record written so far and returns the
// report; it fails the test on any lost, altered, misplaced or out-of-order record.
func auditAll(t *testing.T, f *feed, target []string) audit.Report {
	t.Helper()
	p := f.produced()
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	_, rep, err := audit.ReadUntilComplete(ctx, target, p, audit.Options{})
	if err != nil {
		t.Fatalf("audit: %v\n%s", err, rep)
	}
	if rep.Total.Lost != 0 || rep.Total.Altered != 0 || rep.Total.WrongPartition != 0 || rep.Total.OutOfOrder != 0 {
		t.Fatalf("audit failed:\n%s", rep)
	}
	return rep
}

// condition returns the status, reason and message of a KafkaMirror's condition.
func (e env) condition(t *testing.T, name, typ string) (string, string, string) {
	t.Helper()
	out, err := tryRun("", e.kubectl, "get", "kafkamirror", name, "-n", namespace, "-o", "json")
	if err != nil {
		return "", "", err.Error()
	}
	var m struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason, Message string }
		}
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// waitFor polls cond every second until it is true or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(time.Second)
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	t.Logf("%s after %s", what, took)
	return took
}

// mirrorPods returns the names of the mirror's pods that are not being deleted, and how
// many of them are ready.
func (e env) mirrorPods(t *testing.T, name string) (pods []string, ready int, all int) {
	t.Helper()
	out := e.kc(t, "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/instance="+name, "-o", "json")
	var l struct {
		Items []struct {
			Metadata struct {
				Name              string
				DeletionTimestamp *string
			}
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		all++
		if p.Metadata.DeletionTimestamp != nil {
			continue
		}
		pods = append(pods, p.Metadata.Name)
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready++
			}
		}
	}
	return pods, ready, all
}

// waitPods waits until the mirror has exactly n pods, all ready, and none terminating.
func (e env) waitPods(t *testing.T, name string, n int) time.Duration {
	t.Helper()
	return waitFor(t, fmt.Sprintf("%d ready mirror pods, none terminating", n), readyTimeout, func() bool {
		pods, ready, all := e.mirrorPods(t, name)
		return len(pods) == n && ready == n && all == n
	})
}

func (e env) waitReady(t *testing.T, name string) time.Duration {
	t.Helper()
	return waitFor(t, "KafkaMirror "+name+" Ready=True", readyTimeout, func() bool {
		s, _, _ := e.condition(t, name, "Ready")
		return s == "True"
	})
}

// follower streams one pod's log (kubectl logs -f) from before it is stopped to its end,
// to show how the container ended: "Stopped the mirror cleanly" is what the engine logs
// after a SIGTERM drain; a SIGKILL leaves no such line.
type follower struct {
	pod  string
	out  bytes.Buffer
	done chan struct{}
}

func (e env) follow(t *testing.T, pod string) *follower {
	t.Helper()
	f := &follower{pod: pod, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	cmd := exec.CommandContext(ctx, e.kubectl, "logs", "-f", "-n", namespace, pod)
	cmd.Stdout = &f.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("kubectl logs -f %s: %v", pod, err)
	}
	go func() {
		defer cancel()
		defer close(f.done)
		_ = cmd.Wait()
	}()
	return f
}

// stoppedCleanly waits for the log stream to end and reports whether the engine logged
// its clean stop.
func (f *follower) stoppedCleanly(t *testing.T) bool {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(readyTimeout):
		t.Fatalf("the log of %s did not end within %s", f.pod, readyTimeout)
	}
	return strings.Contains(f.out.String(), "Stopped the mirror cleanly")
}

func mirrorYAML(name string, src, dst []string, extra string) string {
	return fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: KafkaMirror
metadata: {name: %s, namespace: %s}
spec:
  source: {bootstrapServers: [%q]}
  target:
    bootstrapServers: [%q]%s
  topics: {include: ["orders\\..*"]}
  maxInFlightPerPartition: %d
  offsetCommitInterval: %s
`, name, namespace, src[0], dst[0], extra, maxInFlight, offsetCommitInterval)
}

// TestOnANode is one story, in the order; each step needs the ones before it.
func TestOnANode(t *testing.T) {
	e := loadEnv(t)
	chart := filepath.Join(e.root, "charts", "kafka-mirror-operator")
	repo, tag := e.imageRepoTag()
	src := newCluster(t, e.nodeIP)
	dst := newCluster(t, e.nodeIP)
	src.createTopics(t, topics)
	f := newFeed(src.addrs)
	ctx := context.Background()
	var dups int // duplicates on the target so far
	t.Cleanup(func() {
		if t.Failed() {
			for _, args := range [][]string{
				{"get", "pods,deployments,kafkamirrors", "-A", "-o", "wide"},
				{"get", "events", "-A", "--sort-by=.lastTimestamp"},
				{"logs", "-n", operatorNamespace, "-l", "app.kubernetes.io/name=kafka-mirror-operator", "--tail=50"},
				{"logs", "-n", namespace, "-l", "app.kubernetes.io/instance=" + mirrorName, "--tail=30", "--prefix"},
			} {
				out, err := tryRun("", e.kubectl, args...)
				t.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, err)
			}
		}
		_, _ = tryRun("", e.kubectl, "delete", "namespace", namespace, "--wait=false")
	})

	t.Run("helm install", func(t *testing.T) {
		start := time.Now()
		// The mirrors live in namespace, outside the release namespace: the operator may read
		// their Secrets only when it is listed (least privilege by default).
		run(t, "", e.helm, "install", release, chart, "-n", operatorNamespace, "--create-namespace",
			"--set", "image.repository="+repo, "--set-string", "image.tag="+tag, "--set", "image.pullPolicy=Never",
			"--set", "rbac.secretNamespaces={"+namespace+"}",
			"--wait", "--timeout", installTimeout.String())
		t.Logf("helm install --wait returned after %s", time.Since(start).Round(100*time.Millisecond))
		out := e.kc(t, "get", "pods", "-n", operatorNamespace, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.spec.containers[0].image} {.status.containerStatuses[0].ready}{"\n"}{end}`)
		t.Logf("operator pods:\n%s", out)
		if !strings.Contains(out, "Running "+e.image+" true") {
			t.Fatalf("want the operator pod Running and ready with %s", e.image)
		}
	})

	t.Run("KafkaMirror Ready and a counted workload mirrored", func(t *testing.T) {
		e.kc(t, "create", "namespace", namespace)
		if err := f.chunk(ctx, 10*feedRate); err != nil {
			t.Fatal(err)
		}
		e.apply(t, mirrorYAML(mirrorName, src.addrs, dst.addrs, ""))
		e.waitReady(t, mirrorName)
		e.waitPods(t, mirrorName, 1)
		if err := f.chunk(ctx, 10*feedRate); err != nil {
			t.Fatal(err)
		}
		rep := auditAll(t, f, dst.addrs)
		t.Logf("audit: %s", rep.Summary())
		if rep.Total.Duplicated != 0 {
			t.Fatalf("want 0 duplicates, got %d", rep.Total.Duplicated)
		}
	})

	t.Run("scale 1 to 3 to 1 and a rolling spec change: 0 lost, 0 duplicates", func(t *testing.T) {
		f.start()
		e.kc(t, "scale", "kafkamirror/"+mirrorName, "-n", namespace, "--replicas=3")
		e.waitPods(t, mirrorName, 3)
		time.Sleep(5 * time.Second) // let the group settle with three members and mirror
		three, _, _ := e.mirrorPods(t, mirrorName)
		logs := map[string]*follower{}
		for _, p := range three {
			logs[p] = e.follow(t, p)
		}
		e.kc(t, "scale", "kafkamirror/"+mirrorName, "-n", namespace, "--replicas=1")
		e.waitPods(t, mirrorName, 1)
		before, _, _ := e.mirrorPods(t, mirrorName)
		for _, p := range three {
			if p == before[0] {
				continue
			}
			if !logs[p].stoppedCleanly(t) {
				t.Fatalf("scaled-down pod %s ended without \"Stopped the mirror cleanly\"", p)
			}
			t.Logf("scaled-down pod %s: stopped cleanly (SIGTERM drain)", p)
		}
		// A config change rolls the pods: the old one gets SIGTERM from the kubelet and
		// drains within its grace period.
		e.kc(t, "patch", "kafkamirror/"+mirrorName, "-n", namespace, "--type=merge", "-p", `{"spec":{"offsetCommitInterval":"2s"}}`)
		waitFor(t, "a new mirror pod after the spec change", readyTimeout, func() bool {
			pods, ready, all := e.mirrorPods(t, mirrorName)
			return len(pods) == 1 && ready == 1 && all == 1 && pods[0] != before[0]
		})
		if !logs[before[0]].stoppedCleanly(t) {
			t.Fatalf("rolled pod %s ended without \"Stopped the mirror cleanly\"", before[0])
		}
		t.Logf("rolled pod %s: stopped cleanly (SIGTERM drain)", before[0])
		e.waitReady(t, mirrorName)
		f.stopAndWait(t)
		rep := auditAll(t, f, dst.addrs)
		t.Logf("audit: %s", rep.Summary())
		if rep.Total.Duplicated != 0 {
			t.Fatalf("want 0 duplicates through clean hand-overs, got %d", rep.Total.Duplicated)
		}
		dups = rep.Total.Duplicated
	})

	t.Run("force-deleted pod replaced: 0 lost, duplicates bounded", func(t *testing.T) {
		f.start()
		time.Sleep(3 * time.Second)
		pods, _, _ := e.mirrorPods(t, mirrorName)
		log := e.follow(t, pods[0])
		e.kc(t, "delete", "pod", pods[0], "-n", namespace, "--grace-period=0", "--force")
		waitFor(t, "a replacement mirror pod ready", readyTimeout, func() bool {
			now, ready, _ := e.mirrorPods(t, mirrorName)
			return len(now) == 1 && ready == 1 && now[0] != pods[0]
		})
		t.Logf("force-deleted pod %s: engine logged a clean stop: %v", pods[0], log.stoppedCleanly(t))
		time.Sleep(3 * time.Second)
		f.stopAndWait(t)
		rep := auditAll(t, f, dst.addrs)
		t.Logf("audit: %s", rep.Summary())
		// What the killed pod had sent but not committed: at most what is in flight plus
		// one commit interval (2 s after the patch above) of traffic.
		bound := totalPartitions*maxInFlight + 2*feedRate
		if d := rep.Total.Duplicated - dups; d > bound {
			t.Fatalf("%d duplicates from the forced delete, want at most %d", d, bound)
		} else {
			t.Logf("duplicates from the forced delete: %d (bound %d)", d, bound)
		}
		dups = rep.Total.Duplicated
	})

	t.Run("bad target credentials: Ready=False with the reason", func(t *testing.T) {
		sasl := newCluster(t, e.nodeIP, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "mirror", "right-password"))
		e.kc(t, "create", "secret", "generic", "target-creds", "-n", namespace, "--from-literal=password=wrong-password")
		e.apply(t, mirrorYAML("bad-creds", src.addrs, sasl.addrs, `
    sasl: {mechanism: SCRAM-SHA-256, username: mirror, passwordSecretRef: {name: target-creds, key: password}}`))
		var status, reason, msg string
		waitFor(t, "KafkaMirror bad-creds Ready=False with a reason", readyTimeout, func() bool {
			status, reason, msg = e.condition(t, "bad-creds", "Ready")
			return status == "False" && reason != "" && reason != "Progressing"
		})
		t.Logf("Ready=%s reason=%s message=%s", status, reason, msg)
		if l := strings.ToLower(msg); !strings.Contains(l, "sasl") && !strings.Contains(l, "authentic") {
			t.Fatalf("want the message to name the authentication failure, got %q", msg)
		}
		e.kc(t, "delete", "kafkamirror", "bad-creds", "-n", namespace)
	})

	t.Run("helm upgrade and uninstall: the mirror keeps running, CRD kept", func(t *testing.T) {
		oldPods := e.kc(t, "get", "pods", "-n", operatorNamespace, "-o", "jsonpath={.items[*].metadata.name}")
		run(t, "", e.helm, "upgrade", release, chart, "-n", operatorNamespace, "--reuse-values",
			"--set", "logLevel=debug", "--wait", "--timeout", installTimeout.String())
		waitFor(t, "the upgraded operator pod replaced the old one", readyTimeout, func() bool {
			now := e.kc(t, "get", "pods", "-n", operatorNamespace, "-o", "jsonpath={.items[*].metadata.name}")
			return now != "" && !strings.Contains(now, oldPods) && !strings.Contains(now, " ")
		})
		args := e.kc(t, "get", "deployment", "-n", operatorNamespace, "-l", "app.kubernetes.io/name=kafka-mirror-operator",
			"-o", "jsonpath={.items[0].spec.template.spec.containers[0].args}")
		if !strings.Contains(args, "debug") {
			t.Fatalf("want the upgraded operator to run with log level debug, args %s", args)
		}
		e.waitReady(t, mirrorName)

		run(t, "", e.helm, "uninstall", release, "-n", operatorNamespace, "--wait", "--timeout", installTimeout.String())
		e.kc(t, "get", "crd", "kafkamirrors.kafkamirror.io")
		e.kc(t, "get", "kafkamirror", mirrorName, "-n", namespace)
		if out := e.kc(t, "get", "deployments", "-n", operatorNamespace, "-o", "name"); strings.TrimSpace(out) != "" {
			t.Fatalf("want no operator Deployment after uninstall, got %s", out)
		}
		// The mirror's pods do not need the operator.
		e.waitPods(t, mirrorName, 1)
		if err := f.chunk(ctx, 5*feedRate); err != nil {
			t.Fatal(err)
		}
		rep := auditAll(t, f, dst.addrs)
		t.Logf("audit after uninstall: %s", rep.Summary())
		if rep.Total.Duplicated != dups {
			t.Fatalf("duplicates went from %d to %d without a fault", dups, rep.Total.Duplicated)
		}
	})

	t.Run("kubectl apply -k config/default", func(t *testing.T) {
		overlay := t.TempDir()
		// kustomize takes a base outside the overlay only as a relative path.
		base, err := filepath.Rel(overlay, filepath.Join(e.root, "config", "default"))
		if err != nil {
			t.Fatal(err)
		}
		kust := fmt.Sprintf(`resources:
  - %s
images:
  - name: ghcr.io/kafka-mirror/kafka-mirror
    newTag: %q
patches:
  - target: {kind: Deployment, name: kafka-mirror-operator}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/args/4
        value: --engine-image=%s
      - op: add
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
`, base, tag, e.image)
		if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
			t.Fatal(err)
		}
		e.kc(t, "apply", "-k", overlay)
		t.Cleanup(func() {
			// Everything of the story goes, so that the next run starts from an empty cluster.
			_, _ = tryRun("", e.kubectl, "delete", "namespace", namespace, "--timeout=2m")
			_, _ = tryRun("", e.kubectl, "delete", "-k", overlay, "--timeout=2m")
		})
		e.kc(t, "rollout", "status", "deployment/kafka-mirror-operator", "-n", operatorNamespace, "--timeout="+installTimeout.String())
		// The kustomize-installed operator reconciles: a spec change rolls the mirror.
		before, _, _ := e.mirrorPods(t, mirrorName)
		e.kc(t, "patch", "kafkamirror/"+mirrorName, "-n", namespace, "--type=merge", "-p", `{"spec":{"offsetCommitInterval":"1s"}}`)
		waitFor(t, "the mirror rolled by the kustomize-installed operator", readyTimeout, func() bool {
			pods, ready, all := e.mirrorPods(t, mirrorName)
			return len(pods) == 1 && ready == 1 && all == 1 && pods[0] != before[0]
		})
		e.waitReady(t, mirrorName)
		if err := f.chunk(ctx, 5*feedRate); err != nil {
			t.Fatal(err)
		}
		rep := auditAll(t, f, dst.addrs)
		t.Logf("final audit: %s", rep.Summary())
		if rep.Total.Duplicated != dups {
			t.Fatalf("duplicates went from %d to %d through a clean roll", dups, rep.Total.Duplicated)
		}
	})
}
