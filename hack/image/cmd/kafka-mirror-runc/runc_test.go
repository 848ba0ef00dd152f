package main

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
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The workload TestRuncDrain mirrors: two batches, the second while the container runs,
// so that the SIGTERM drain has offsets to commit.
const (
	drainTopic      = "runc.orders"
	drainPartitions = 4
	batchRecords    = 2000
	drainGroup      = "kafka-mirror.runc"
	commitInterval  = time.Second
	// The engine's SIGTERM drain fits in its delivery timeout plus a commit; three times
	// that on a busy machine is still far below the pod's grace period it stands for.
	deliveryTimeout = 20 * time.Second
	exitCeiling     = 3 * (deliveryTimeout + commitInterval)
	mirrorCeiling   = 2 * time.Minute
)

// liveRunc skips unless make image-run asked for the live runc tests: they need root,
// runc and the unpacked image.
func liveRunc(t *testing.T) {
	t.Helper()
	if os.Getenv("KAFKA_MIRROR_RUNC_TEST") != "1" {
		t.Skip("runs under runc; make image-run sets KAFKA_MIRROR_RUNC_TEST=1")
	}
	if os.Geteuid() != 0 {
		t.Fatal("runc containers with the chart's UID need root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed (apt-get install runc)")
	}
	for _, v := range []string{"KAFKA_MIRROR_IMAGE", "KAFKA_MIRROR_ROOTFS"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is not set (make image-run sets it)", v)
		}
	}
}

// wrapper builds this command once into a test directory.
func wrapper(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kafka-mirror-runc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestRuncVersion runs `kafka-mirror version` in the container.
func TestRuncVersion(t *testing.T) {
	liveRunc(t)
	out, err := exec.Command(wrapper(t), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-mirror version under runc: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "kafka-mirror ") || !strings.Contains(string(out), "commit:") {
		t.Errorf("kafka-mirror version under runc printed %q, want the version and commit", out)
	}
}

// TestRuncDrain runs `kafka-mirror run` in the container against two kfake clusters on
// the host, checks from the host that the container's process has the chart's
// securityContext, mirrors a counted workload, sends SIGTERM to the runc process as a
// harness or the kubelet would, and checks the drain: exit code 0, every record on the
// target exactly once, every partition committed to its end.
func TestRuncDrain(t *testing.T) {
	liveRunc(t)
	src, dst := newCluster(t), newCluster(t)
	produce(t, src, 0, batchRecords)

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "mirror.yaml")
	cfg := fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: %s
topics: {include: ["runc\\..*"]}
syncTopics: false
streams: 2
offsetCommitInterval: %s
deliveryTimeout: %s
metrics: {address: %q}
`, src.ListenAddrs()[0], dst.ListenAddrs()[0], drainGroup, commitInterval, deliveryTimeout, freeAddr(t))
	// 0600 as the harnesses write it: the container reads its projected copy.
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "engine.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(wrapper(t), "run", "--config", cfgPath, "--log-format", "json")
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
			t.Logf("engine log:\n%s", tail(log, 30))
		}
	})

	waitTarget(t, dst, batchRecords, exited)
	checkSecurityContext(t, containerPid(t, id))
	produce(t, src, batchRecords, batchRecords)
	waitTarget(t, dst, 2*batchRecords, exited)

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if code := cmd.ProcessState.ExitCode(); err != nil || code != 0 {
			t.Fatalf("after SIGTERM the container exited with %v (code %d), want 0", err, code)
		}
		t.Logf("the container drained and exited 0 %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(exitCeiling):
		t.Fatalf("the container did not exit within %v of SIGTERM", exitCeiling)
	}

	lost, dups := audit(t, dst, 2*batchRecords)
	if lost != 0 || dups != 0 {
		t.Errorf("the target lost %d and duplicated %d of %d records, want 0 and 0", lost, dups, 2*batchRecords)
	}
	committed := committedOffsets(t, src)
	var sum int64
	for _, o := range committed {
		sum += o
	}
	if len(committed) != drainPartitions || sum != 2*batchRecords {
		t.Errorf("the drain committed %v (sum %d) over %d partitions, want all %d records over %d", committed, sum, len(committed), 2*batchRecords, drainPartitions)
	}
	t.Logf("mirrored %d records under runc: lost %d, duplicated %d, committed %d", 2*batchRecords, lost, dups, sum)
}

// checkSecurityContext reads the container's process from the host and checks what the
// chart's securityContext asks for took effect.
func checkSecurityContext(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	zero := "0000000000000000"
	tests := []struct{ field, want, why string }{
		{"Uid", "65532 65532 65532 65532", "runAsUser: 65532"},
		{"Gid", "65532 65532 65532 65532", "runAsGroup: 65532"},
		{"CapEff", zero, "capabilities: drop: [ALL]"},
		{"CapPrm", zero, "capabilities: drop: [ALL]"},
		{"CapBnd", zero, "capabilities: drop: [ALL]"},
		{"CapAmb", zero, "capabilities: drop: [ALL]"},
		{"NoNewPrivs", "1", "allowPrivilegeEscalation: false"},
		{"Seccomp", "2", "seccompProfile (a filter is installed)"},
	}
	for _, tc := range tests {
		if got := fields[tc.field]; got != tc.want {
			t.Errorf("the container's %s is %q, want %q (%s)", tc.field, got, tc.want, tc.why)
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	rootRO := false
	for _, line := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			rootRO = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
		}
	}
	if !rootRO {
		t.Error("the container's root file system is not mounted read-only (readOnlyRootFilesystem: true)")
	}
	for _, ns := range []struct {
		name string
		same bool
	}{{"net", true}, {"pid", false}, {"mnt", false}} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns.name)
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns.name))
		if err != nil {
			t.Fatal(err)
		}
		if (mine == theirs) != ns.same {
			t.Errorf("the container's %s namespace is %s, the host's %s; want same=%v", ns.name, theirs, mine, ns.same)
		}
	}
	t.Logf("container process %d: Uid %s, CapEff %s, NoNewPrivs %s, Seccomp %s, root read-only", pid, fields["Uid"], fields["CapEff"], fields["NoNewPrivs"], fields["Seccomp"])
}

func runcRoot() string { return envOr("KAFKA_MIRROR_RUNC_ROOT", defaultRuncRoot) }

// containerPid asks runc for the host PID of the container's process.
func containerPid(t *testing.T, id string) int {
	t.Helper()
	out, err := exec.Command("runc", "--root", runcRoot(), "state", id).Output()
	if err != nil {
		t.Fatalf("runc state %s: %v", id, err)
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "running" || st.Pid == 0 {
		t.Fatalf("runc state %s: %s", id, out)
	}
	return st.Pid
}

func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(drainPartitions, drainTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes records first..first+n-1 to the source, each value naming its number.
func produce(t *testing.T, c *kfake.Cluster, first, n int) {
	t.Helper()
	cl := client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := first; i < first+n; i++ {
		rs = append(rs, &kgo.Record{Topic: drainTopic, Key: fmt.Appendf(nil, "k%d", i%97), Value: fmt.Appendf(nil, "r%d", i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing the workload: %v", err)
	}
}

// endSum is the sum of the target topic's end offsets.
func endSum(t *testing.T, c *kfake.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(client(t, c)).ListEndOffsets(ctx, drainTopic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// waitTarget waits for the target to hold n records, failing early if the container exits.
func waitTarget(t *testing.T, c *kfake.Cluster, n int64, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(mirrorCeiling)
	for time.Now().Before(deadline) {
		if endSum(t, c) >= n {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("the container exited (%v) before the target held %d records", err, n)
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("the target held %d records after %v, want %d", endSum(t, c), mirrorCeiling, n)
}

// audit reads the whole target topic and counts produced values missing and repeated.
func audit(t *testing.T, c *kfake.Cluster, produced int) (lost, dups int) {
	t.Helper()
	end := endSum(t, c)
	cl := client(t, c, kgo.ConsumeTopics(drainTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]int{}
	var read int64
	for read < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading the target: read %d of %d records: %v", read, end, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			read++
		})
	}
	for i := range produced {
		switch n := seen[fmt.Sprintf("r%d", i)]; {
		case n == 0:
			lost++
		case n > 1:
			dups += n - 1
		}
	}
	return lost, dups
}

// committedOffsets returns the group's committed offset per partition of the source topic.
func committedOffsets(t *testing.T, c *kfake.Cluster) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(client(t, c)).FetchOffsets(ctx, drainGroup)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == drainTopic {
			out[o.Partition] = o.At
		}
	})
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
