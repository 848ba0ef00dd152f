package testutil

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	const writers, lines = 8, 100
	var b SyncBuffer
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != writers*lines {
		t.Errorf("the buffer holds %d lines, want %d", got, writers*lines)
	}
}

func TestEventuallyRetriesUntilNil(t *testing.T) {
	calls := 0
	Eventually(t, time.Minute, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("check was called %d times, want 3 (until it returned nil)", calls)
	}
}

func TestWaitForPollsUntilTrue(t *testing.T) {
	calls := 0
	WaitFor(t, time.Minute, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond was called %d times, want 3", calls)
	}
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f) // stop the helper as t.Fatalf's Goexit would
}

// failure runs fn with a fatalTB and returns what it failed with.
func failure(fn func(tb testing.TB)) (msg string) {
	f := &fatalTB{}
	defer func() {
		if r := recover(); r != f {
			panic(r)
		}
		msg = f.msg
	}()
	fn(f)
	return ""
}

func TestTimeouts(t *testing.T) {
	tests := map[string]struct {
		run  func(tb testing.TB)
		want string
	}{
		"Eventually quotes the last error": {
			run:  func(tb testing.TB) { Eventually(tb, 0, func() error { return errors.New("still down") }) },
			want: "still failing after 0s: still down",
		},
		"WaitFor names what it waited for": {
			run:  func(tb testing.TB) { WaitFor(tb, 0, "the engine", func() bool { return false }) },
			want: "timed out after 0s waiting for the engine",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := failure(tc.run); got != tc.want {
				t.Errorf("failed with %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := WriteFile(t, dir, "a.yaml", "x: 1\n")
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "x: 1\n" || !strings.HasPrefix(p, dir) {
		t.Errorf("WriteFile = %q holding %q (%v), want %s/a.yaml holding %q", p, got, err, dir, "x: 1\n")
	}
}

func TestCommittedOffsets(t *testing.T) {
	const topic, group, partitions = "orders", "mirror-test", 3
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Kafka 3.6 versions: OffsetCommit by topic name, as sarama reads it back.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(kversion.V3_6_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	commit := map[int32]int64{0: 5, 2: 9}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1 // a commit outside a group session, as an admin tool makes
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range commit {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("committing %s/%d: %v", rt.Topic, rp.Partition, err)
			}
		}
	}

	got := CommittedOffsets(t, c.ListenAddrs(), group, topic, partitions)
	want := map[int32]int64{0: 5, 1: -1, 2: 9}
	if !maps.Equal(got, want) {
		t.Errorf("CommittedOffsets = %v, want %v (-1 where nothing was committed)", got, want)
	}
}
