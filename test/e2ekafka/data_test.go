//go:build kafka

package e2ekafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Data faults: what a real broker's log layer does to the records under the mirror
// (transaction markers and aborted ranges, the log cleaner, retention, size limits). They
// run on single-broker clusters: the property under test lives in one broker's log, not in
// replication.

// TestTransactionalSource: the source is written in transactions of 100 records, 30%
// aborted, by a real transaction coordinator (commit and abort markers take offsets).
// No aborted record reaches the target, nothing committed is lost, and the engine's
// committed offset reaches the end of every partition (nothing stuck on a marker).
func TestTransactionalSource(t *testing.T) { transactionalSource(t, column{}) }

// TestTransactionalSourceExactlyOnce is TestTransactionalSource with delivery
// exactlyOnce: read_committed on both sides, zero duplicates.
func TestTransactionalSourceExactlyOnce(t *testing.T) {
	transactionalSource(t, column{exactlyOnce: true})
}

func transactionalSource(t *testing.T, col column) {
	s := newScenario(t, world{}, smokeTopics())
	e := s.startJoined("engine", s.config(col.apply))
	w := s.workload(40_000, 4000, 0)
	w.TransactionSize = 100
	w.AbortFraction = 0.3
	p := s.produce(w).Wait(t)
	rep := col.complete(s, p)
	s.waitCommittedEnd(2 * time.Minute)
	e.StopCleanly(time.Minute)
	if rep.Aborted != 0 {
		t.Errorf("%d records of aborted source transactions reached the target", rep.Aborted)
	}
	maxDup := 0
	if !col.exactlyOnce {
		maxDup = e2eharness.Partitions(s.topics) * maxInFlight
	}
	s.assertAudit(rep, maxDup)
	f := col.figures(map[string]any{"aborted_on_source": len(p.Aborted), "aborted_on_target": rep.Aborted})
	f["brokers"] = 1
	s.figures(rep, f)
}

// waitCommittedEnd waits until the engine's committed source offset of every partition
// equals the source's end offset (lag 0, past trailing markers and gaps).
func (s *scenario) waitCommittedEnd(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var behind []string
	for time.Now().Before(deadline) {
		committed := committed(s.t, s.src, s.group)
		behind = behind[:0]
		for topic, ps := range endOffsets(s.t, s.src, s.topics) {
			for p, end := range ps {
				if c := committed[topic][p]; c != end {
					behind = append(behind, fmt.Sprintf("%s/%d committed %d of %d", topic, p, c, end))
				}
			}
		}
		if len(behind) == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.t.Errorf("the committed offsets did not reach the source's end offsets within %v (lag not 0): %s", timeout, strings.Join(behind, ", "))
}

// TestCompactedSourceAfterCleaner: a compacted source topic whose log cleaner has run
// (rolled segments every 500 ms, 50 keys), so its offsets have gaps where overwritten
// records and old tombstones were removed. The engine mirrors every record the source
// still holds, and its committed offset reaches each partition's end (lag 0: it does
// not wait for offsets that no longer exist). kfake has no log cleaner.
func TestCompactedSourceAfterCleaner(t *testing.T) {
	compact := map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.ms":                kadm.StringPtr("500"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"min.compaction.lag.ms":     kadm.StringPtr("0"),
		"delete.retention.ms":       kadm.StringPtr("100"),
	}
	// topicConfigs apply to the source topic only: the target's is created below.
	s := newScenario(t, world{noTargetTopics: true, topicConfigs: compact}, map[string]int32{"e2e.compacted": 4})
	// The target keeps every copy (delete policy), so that the audit sees each record
	// the source still held; a compacted target would drop older copies itself.
	createTopics(t, s.dst, s.topics, 1, nil)
	w := s.workload(20_000, 2000, 0)
	w.Keys = 50
	p := s.produce(w).Wait(t)
	// One more round of records rolls the last segments, so the cleaner sees them.
	time.Sleep(time.Second)
	w2 := s.workload(400, 0, 0)
	w2.Keys, w2.Run = 50, "roll"
	p2 := s.produce(w2).Wait(t)
	p.Merge(p2)
	held := s.waitCompacted(p, 2*time.Minute)
	t.Logf("the log cleaner left %d of %d records on the source", len(held.Records), len(p.Records))

	e := s.startJoined("engine", s.config(nil))
	s.waitCommittedEnd(2 * time.Minute)
	// The cleaner goes on removing records while the engine reads, so the records the
	// engine must have mirrored are those the source still holds now (a cleaner only
	// removes: each was there throughout). Every other target record must be one the
	// source acknowledged, once and in order.
	final := s.waitCompacted(held, 0)
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	m, rep, err := audit.ReadUntilComplete(ctx, s.dst.Addrs(), final, audit.Options{})
	if err != nil {
		t.Fatalf("the target never held every record the source still holds: %v\n%s", err, rep)
	}
	e.StopCleanly(time.Minute)
	whole := audit.Audit(p, m, audit.Options{})
	if whole.Unknown != 0 || whole.Total.Duplicated != 0 || whole.Total.OutOfOrder != 0 || whole.Total.WrongPartition != 0 || whole.Total.Altered != 0 {
		t.Errorf("target records against every acknowledged one: unknown %d, duplicated %d, out of order %d, wrong partition %d, altered %d", whole.Unknown, whole.Total.Duplicated, whole.Total.OutOfOrder, whole.Total.WrongPartition, whole.Total.Altered)
	}
	s.figures(rep, map[string]any{"brokers": 1, "written": len(p.Records), "left_by_cleaner": len(held.Records),
		"left_at_the_end": len(final.Records), "target": whole.Target})
}

// waitCompacted waits until the log cleaner removed at least a third of p's records from
// the source (with timeout 0: does not wait), and returns the records the source still
// holds.
func (s *scenario) waitCompacted(p *audit.Produced, timeout time.Duration) *audit.Produced {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		m, err := audit.ReadAll(ctx, s.src.Addrs(), p.Topics(), audit.ReadOptions{})
		cancel()
		if err != nil {
			s.t.Fatalf("reading the source: %v", err)
		}
		if len(m.Records) <= len(p.Records)*2/3 || timeout == 0 {
			present := make(map[string]bool, len(m.Records))
			for _, r := range m.Records {
				present[r.ID] = true
			}
			held := &audit.Produced{Partitions: p.Partitions}
			for _, r := range p.Records {
				if present[r.ID] {
					held.Records = append(held.Records, r)
				}
			}
			return held
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the log cleaner left %d of %d records after %v", len(m.Records), len(p.Records), timeout)
		}
		time.Sleep(time.Second)
	}
}

// TestRetentionUnderStoppedMirror: the engine is stopped; retention on the source
// deletes records past the group's committed offset (real retention: segments rolled
// and removed by the broker, not DeleteRecords). The restarted engine must report the
// gap as data lost on the source, naming the partition and the remedy, not reset
// silently.
func TestRetentionUnderStoppedMirror(t *testing.T) {
	s := newScenario(t, world{}, map[string]int32{"e2e.retained": 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := alterTopicConfig(ctx, s.src, "e2e.retained", "segment.ms", "500"); err != nil {
		t.Fatal(err)
	}
	cfg := s.config(nil)
	e := s.startJoined("engine-0", cfg)
	first := s.produce(s.workload(10_000, 0, 0)).Wait(t)
	s.waitComplete(first, audit.Options{})
	e.StopCleanly(time.Minute)
	committedBefore := committed(t, s.src, s.group)["e2e.retained"]

	w := s.workload(10_000, 2000, 0)
	w.Run = "second"
	s.produce(w).Wait(t)
	time.Sleep(time.Second)
	if err := alterTopicConfig(ctx, s.src, "e2e.retained", "retention.ms", "1000"); err != nil {
		t.Fatal(err)
	}
	roll := s.workload(20, 0, 0)
	roll.Run = "roll"
	s.produce(roll).Wait(t) // rolls the segments that retention can then delete
	starts := s.waitLogStartPast(committedBefore, 2*time.Minute)
	t.Logf("retention moved the log start offsets to %v (committed %v)", starts, committedBefore)

	e = s.startEngine("engine-1", cfg)
	var line string
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && line == "" {
		if ls := e.LogLines("e2e.retained", "reset"); len(ls) > 0 && strings.Contains(strings.ToLower(ls[0]), "error") {
			line = ls[0]
		}
		time.Sleep(500 * time.Millisecond)
	}
	if line == "" {
		t.Errorf("the engine did not report the records retention deleted under it, with the remedy, within a minute; log tail:\n%s", e.LogTail(15))
	}
	exited := false
	select {
	case <-e.Done():
		exited = true
	case <-time.After(10 * time.Second):
		e.StopCleanly(time.Minute)
	}
	t.Logf("engine reported: %.400s", line)
	s.figures(audit.Report{}, map[string]any{"brokers": 1, "reported": line != "", "engine_exited": exited, "exit_code": e.ExitCode(),
		"committed": fmt.Sprint(committedBefore), "log_start": fmt.Sprint(starts)})
}

// alterTopicConfig sets one config of topic on c.
func alterTopicConfig(ctx context.Context, c *realkafka.Cluster, topic, name, value string) error {
	res, err := c.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("setting %s=%s on %s: %w", name, value, topic, err)
	}
	return nil
}

// waitLogStartPast waits until every partition's log start offset on the source is
// past its offset in committed, and returns the start offsets.
func (s *scenario) waitLogStartPast(committed map[int32]int64, timeout time.Duration) map[int32]int64 {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		listed, err := s.src.Admin().ListStartOffsets(ctx, e2eharness.TopicNames(s.topics)...)
		cancel()
		starts := map[int32]int64{}
		past := err == nil
		if err == nil {
			listed.Each(func(o kadm.ListedOffset) {
				starts[o.Partition] = o.Offset
				if o.Offset <= committed[o.Partition] {
					past = false
				}
			})
		}
		if past {
			return starts
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("retention did not delete past the committed offsets %v within %v (log start %v, %v)", committed, timeout, starts, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestTargetMaxMessageBytes: the target topics accept batches of at most 64 KiB
// (max.message.bytes=65536) while the source's are 1 MiB: the engine sizes its batches
// by the target's limit (it reads it with DescribeConfigs) and mirrors everything; a
// batch the broker refused as too large would be a lost or stuck record.
func TestTargetMaxMessageBytes(t *testing.T) {
	s := newScenario(t, world{noTargetTopics: true}, smokeTopics())
	createTopics(t, s.dst, s.topics, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("65536")})
	e := s.startJoined("engine", s.config(nil))
	w := s.workload(20_000, 0, 0)
	w.ValueSize = 1000
	p := s.produce(w).Wait(t)
	rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	sized := e.LogLines("Sized record batches")
	if len(sized) == 0 {
		t.Errorf("the engine did not log how it sized its batches")
	} else if !strings.Contains(sized[0], `"batchBytes":6`) { // 65536 less the batch overhead
		t.Logf("batches sized: %.300s", sized[0])
	}
	s.figures(rep, map[string]any{"brokers": 1, "target_max_message_bytes": 65536, "value_bytes": w.ValueSize})
}

// TestFiveMegabyteRecords: records of 5 MB between topics that allow 10 MB on both sides
// (max.message.bytes=10485760; the brokers' default stays 1 MiB), among ordinary ones.
// Real brokers check each batch against the topic's limit, and a fetch must grow to
// take a 5 MB batch: the engine mirrors them whole.
func TestFiveMegabyteRecords(t *testing.T) {
	const big = 5 << 20
	tenMB := kadm.StringPtr(strconv.Itoa(10 << 20))
	s := newScenario(t, world{noTargetTopics: true}, map[string]int32{"e2e.large": 2})
	// The source topic is re-created with the 10 MB limit.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := alterTopicConfig(ctx, s.src, "e2e.large", "max.message.bytes", *tenMB); err != nil {
		t.Fatal(err)
	}
	createTopics(t, s.dst, s.topics, 1, map[string]*string{"max.message.bytes": tenMB})
	e := s.startJoined("engine", s.config(nil))
	small := s.workload(2000, 0, 0)
	p := s.produce(small).Wait(t)
	p.Merge(s.produceLarge(ctx, "e2e.large", 6, big))
	rep := s.waitComplete(p, audit.Options{})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 1, "large_records": 6, "large_bytes": big})
}

// produceLarge writes n records of size bytes to topic, spread over its partitions, with
// audit ids, and returns them as acknowledged.
func (s *scenario) produceLarge(ctx context.Context, topic string, n, size int) *audit.Produced {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.src.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(int32(size+(64<<10))), kgo.MaxBufferedBytes(4*size))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	out := &audit.Produced{Partitions: map[string]int32{topic: s.topics[topic]}}
	for i := range n {
		partition := int32(i) % s.topics[topic]
		id := fmt.Sprintf("%s/%d/large.%d", topic, partition, i)
		value := make([]byte, size)
		copy(value, id)
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte(id), Value: value,
			Headers: []kgo.RecordHeader{{Key: audit.HeaderID, Value: []byte(id)}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			s.t.Fatalf("writing a %d-byte record to the source: %v", size, err)
		}
		out.Records = append(out.Records, audit.ProducedRecord{Topic: topic, Partition: partition, Offset: r.Offset, ID: id, Digest: audit.Digest(r)})
	}
	return out
}
