// Package testutil holds the small helpers that tests all over the repository need:
// a buffer a child process or a logger may write while the test reads it, polling with
// a ceiling (Eventually, WaitFor), a fixture file in a directory, and committing and
// reading a consumer group's offsets on a Kafka cluster. It is imported only by tests.
package testutil

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

const (
	// eventuallyInterval is the time between two checks of Eventually: the things it
	// waits for (an API server write, a controller's reaction) take tens of milliseconds.
	eventuallyInterval = 100 * time.Millisecond
	// waitForInterval is the time between two checks of WaitFor, which waits on
	// in-process state and cheap reads.
	waitForInterval = 50 * time.Millisecond
)

// SyncBuffer is a bytes.Buffer that writers on other goroutines (a child process's
// output copier, a logger) and the test may use at once. Its zero value is ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Eventually calls check until it returns nil, and fails the test with check's last
// error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %s: %v", timeout, err)
		}
		time.Sleep(eventuallyInterval)
	}
}

// WaitFor calls cond until it holds, and fails the test naming what it waited for once
// timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(waitForInterval)
	}
}

// WriteFile writes content to dir/name (dir must exist) and returns the path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// CommitOffsets commits offsets (partition -> offset) of topic for group on the
// cluster at brokers, each with metadata (empty for none), as a client of the group
// would; any partition the coordinator refuses fails the test.
func CommitOffsets(t testing.TB, brokers []string, group, topic string, offsets map[int32]int64, metadata string) {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	cl, err := sarama.NewClient(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	req := sarama.NewOffsetCommitRequest(sc, group)
	for p, o := range offsets {
		req.AddBlockWithLeaderEpoch(topic, p, o, -1, 0, metadata)
	}
	coordinator, err := cl.Coordinator(group)
	if err != nil {
		t.Fatalf("while finding the coordinator of group %s: %v", group, err)
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		t.Fatalf("while committing offsets of group %s: %v", group, err)
	}
	for _, ps := range resp.Errors {
		for p, kerr := range ps {
			if !errors.Is(kerr, sarama.ErrNoError) {
				t.Fatalf("while committing offsets of group %s: partition %d: %v", group, p, kerr)
			}
		}
	}
}

// CommittedOffsets reads the offsets group committed for partitions 0..partitions-1 of
// topic from the cluster at brokers. A partition without a commit reads -1; a
// partition the answer leaves out is absent.
func CommittedOffsets(t testing.TB, brokers []string, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range parts {
		if b := resp.GetBlock(topic, p); b != nil {
			out[p] = b.Offset
		}
	}
	return out
}
