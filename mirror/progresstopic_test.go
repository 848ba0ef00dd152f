package mirror

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

func TestProgressTopicName(t *testing.T) {
	for name, tc := range map[string]struct{ group, want string }{
		"plain":         {"kafka-mirror.default.orders", "__kafka-mirror.progress.kafka-mirror.default.orders"},
		"invalid chars": {"team/a:orders", "__kafka-mirror.progress.team_a_orders"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ProgressTopic(tc.group); got != tc.want {
				t.Errorf("ProgressTopic(%q) = %q, want %q", tc.group, got, tc.want)
			}
		})
	}
	long := ProgressTopic(string(make([]byte, 300)))
	if len(long) != 249 {
		t.Errorf("a 300-character group gives a %d-character topic name, want Kafka's limit 249", len(long))
	}
}

func TestProgressRecordRoundTrip(t *testing.T) {
	for name, p := range map[string]position{
		"with id":    {next: 1 << 40, topicID: "yq01fZmZsEBFwnqg8HjNXQ"},
		"without id": {next: 0},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeProgressRecord(encodeProgressRecord(p))
			if err != nil || got != p {
				t.Errorf("round trip of %+v gave %+v, %v", p, got, err)
			}
		})
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short":           {progressRecordVersion, 0, 0},
		"unknown version": append([]byte{9}, make([]byte, 8)...),
		"negative offset": {progressRecordVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			if p, err := decodeProgressRecord(b); err == nil {
				t.Errorf("decoding %x gave %+v, want an error", b, p)
			}
		})
	}
}

// TestProgressTopicKeepsLatestThroughCompaction writes a partition's position several
// times, lets the target compact the topic and reads it back, as a new process does:
// the latest position of every partition, the topic compacted with hourly segments,
// and a topic deleted and created again is read from its start.
func TestProgressTopicKeepsLatestThroughCompaction(t *testing.T) {
	c := newClusters(t, 2)
	cfg := c.testConfig(t)
	admin := targetAdmin(t, c)
	reader, err := sarama.NewClient(c.target.ListenAddrs(), func() *sarama.Config {
		sc := sarama.NewConfig()
		sc.Version = sarama.V3_6_0_0
		return sc
	}())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	e := &Engine{cfg: cfg, log: testLogger(t)}
	writer := newProgressTopic(e, admin, reader)
	defer writer.close()

	p0, p1 := partitionKey{testTopic, 0}, partitionKey{testTopic, 1}
	for i := int64(1); i <= 5; i++ {
		if err := writer.write(map[partitionKey]position{p0: {next: 100 * i, topicID: "id-a"}, p1: {next: 10 * i, topicID: "id-a"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Unchanged positions are not written again.
	before := endOffset(t, reader, writer.name)
	if err := writer.write(map[partitionKey]position{p0: {next: 500, topicID: "id-a"}, p1: {next: 50, topicID: "id-a"}}); err != nil {
		t.Fatal(err)
	}
	if after := endOffset(t, reader, writer.name); after != before {
		t.Errorf("writing unchanged positions moved the topic's end from %d to %d", before, after)
	}
	configs, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: writer.name})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact", "segment.ms": "3600000"}
	for _, entry := range configs {
		if v, ok := want[entry.Name]; ok {
			if entry.Value != v {
				t.Errorf("progress topic config %s = %q, want %q", entry.Name, entry.Value, v)
			}
			delete(want, entry.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("progress topic configs %v not set", want)
	}

	c.target.Compact()
	start, err := reader.GetOffset(writer.name, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	if start == 0 {
		t.Log("kfake compacted nothing away from the start (it keeps the last batch)")
	}
	fresh := newProgressTopic(e, admin, reader)
	got, err := fresh.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got[p0] != (position{500, "id-a"}) || got[p1] != (position{50, "id-a"}) || len(got) != 2 {
		t.Errorf("read after compaction: %v, want orders/0 at 500 and orders/1 at 50", got)
	}

	// The topic deleted and created again (by a person): what was read of the old one
	// is forgotten.
	if err := admin.DeleteTopic(writer.name); err != nil {
		t.Fatal(err)
	}
	writer.close()
	writer = newProgressTopic(e, admin, reader)
	testutil.WaitFor(t, 30*time.Second, "the progress topic written again", func() bool {
		return writer.write(map[partitionKey]position{p0: {next: 7, topicID: "id-b"}}) == nil
	})
	if err := reader.RefreshMetadata(writer.name); err != nil {
		t.Fatal(err)
	}
	got, err = fresh.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got[p0] != (position{7, "id-b"}) || len(got) != 1 {
		t.Errorf("read after the topic was created again: %v, want only orders/0 at 7", got)
	}
}

func endOffset(t *testing.T, client sarama.Client, topic string) int64 {
	t.Helper()
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// TestProgressTopicRefused runs a mirror whose target principal may not create the
// progress topic, or may not write to it (TOPIC_AUTHORIZATION_FAILED, a missing ACL):
// the mirror still mirrors every record once, keeps its progress in the groups, and
// says once what to grant, with the broker's reason.
func TestProgressTopicRefused(t *testing.T) {
	for name, refuse := range map[string]int16{"create": kmsg.CreateTopics.Int16(), "write": kmsg.Produce.Int16()} {
		t.Run(name, func(t *testing.T) {
			const partitions, n = 2, 200
			c := newClusters(t, partitions)
			cfg := c.testConfig(t)
			topic := ProgressTopic(cfg.ConsumerGroup)
			c.target.ControlKey(refuse, func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.target.KeepControl()
				switch req := req.(type) {
				case *kmsg.CreateTopicsRequest:
					if len(req.Topics) != 1 || req.Topics[0].Topic != topic {
						return nil, nil, false
					}
					resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
					rt := kmsg.NewCreateTopicsResponseTopic()
					rt.Topic, rt.ErrorCode = topic, kerr.TopicAuthorizationFailed.Code
					resp.Topics = append(resp.Topics, rt)
					return resp, nil, true
				case *kmsg.ProduceRequest:
					if len(req.Topics) != 1 || req.Topics[0].Topic != topic {
						return nil, nil, false
					}
					resp := req.ResponseKind().(*kmsg.ProduceResponse)
					rt := kmsg.NewProduceResponseTopic()
					rt.Topic = topic
					for _, p := range req.Topics[0].Partitions {
						rp := kmsg.NewProduceResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
					return resp, nil, true
				}
				return nil, nil, false
			})
			w := newWorkload(partitions)
			w.produce(t, c.source, n)
			logs, log := newLogLines(t)
			r := startEngine(t, cfg, log)
			got := readTarget(t, c.target, testTopic, w.total(), time.Second, time.Minute)
			if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
				t.Errorf("%d missing, %d duplicates, want 0 and 0", res.missing, res.duplicates)
			}
			testutil.WaitFor(t, 30*time.Second, "every partition committed", func() bool {
				return len(progressOffsets(t, c, cfg.ConsumerGroup, partitions)) == partitions
			})
			// The keeper's next write of the progress topic, or the last at the stop.
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if n := logs.count("Failed to write the progress topic", "grant the target principal Create", "not authorized"); n != 1 {
				t.Errorf("%d log lines say the progress topic could not be written, why, and what to grant; want 1", n)
			}
			if n := logs.count("Wrote the progress topic again"); n != 0 {
				t.Errorf("%d log lines say the progress topic was written again, though every write was refused", n)
			}
		})
	}
}

// TestProgressTopicReadRefused starts a new mirror whose target principal may write the
// progress topic but not read it (no Read ACL: TOPIC_AUTHORIZATION_FAILED on every
// fetch). Waiting cannot help, so the partitions no group has an offset for start at
// initialOffset at once, and the log says what to grant; a read that waited for an
// answer would hold every session's Setup until its 30 s limit, again and again.
func TestProgressTopicReadRefused(t *testing.T) {
	const partitions, n = 2, 200
	c := newClusters(t, partitions)
	cfg := c.testConfig(t)
	topic := ProgressTopic(cfg.ConsumerGroup)
	// A record of another topic in the progress topic, so that reading it takes a fetch.
	other := newProgressTopic(&Engine{cfg: cfg, log: testLogger(t)}, targetAdmin(t, c), nil)
	if err := other.write(map[partitionKey]position{{"other", 0}: {next: 5}}); err != nil {
		t.Fatal(err)
	}
	other.close()
	c.target.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		freq := req.(*kmsg.FetchRequest)
		if len(freq.Topics) != 1 || freq.Topics[0].Topic != topic {
			return nil, nil, false
		}
		resp := freq.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = topic, freq.Topics[0].TopicID
		for _, fp := range freq.Topics[0].Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	w := newWorkload(partitions)
	w.produce(t, c.source, n)
	logs, log := newLogLines(t)
	started := time.Now()
	r := startEngine(t, cfg, log)
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, time.Minute)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
		t.Errorf("%d missing, %d duplicates, want 0 and 0", res.missing, res.duplicates)
	}
	if waited := time.Since(started); waited > resumeLookupLimit {
		t.Errorf("the mirror took %v to mirror %d records: it waited for the unreadable progress topic (limit %v)", waited, w.total(), resumeLookupLimit)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := logs.count("Cannot read the progress topic", "grant"); n == 0 {
		t.Errorf("no log line says the progress topic could not be read and what to grant")
	}
}

// TestFirstSetupDoesNotWaitForTheProgressTopic: at a mirror's first start the progress
// topic does not exist. The first session's Setup reads it (the groups have no offset),
// and the keeper must not create it meanwhile: a topic created during that read made
// the read wait for the new topic's leader through the client's metadata retries and
// backoff, about 0.3 s of the start across a 100 ms round trip. Counted here: requests
// that create the progress topic, and client metadata requests (which may auto-create)
// naming it, before the first partition was started: none of either.
func TestFirstSetupDoesNotWaitForTheProgressTopic(t *testing.T) {
	const partitions, n = 2, 100
	c := newClusters(t, partitions)
	// One stream: with two, the second's join can end the first's first session during
	// its Setup (seen under load), and the keeper rightly opens the topic after that
	// Setup's look-ups, before the next session starts a partition.
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	topic := ProgressTopic(cfg.ConsumerGroup)
	logs, log := newLogLines(t)
	started := func() bool { return logs.count("Started partition at initialOffset") > 0 }
	var earlyCreate, earlyMeta, created atomic.Int64
	c.target.ControlKey(kmsg.CreateTopics.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
			if rt.Topic == topic {
				created.Add(1)
				if !started() {
					earlyCreate.Add(1)
				}
			}
		}
		return nil, nil, false
	})
	c.target.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		mreq := req.(*kmsg.MetadataRequest)
		for _, rt := range mreq.Topics {
			if rt.Topic != nil && *rt.Topic == topic && mreq.AllowAutoTopicCreation && !started() {
				earlyMeta.Add(1)
			}
		}
		return nil, nil, false
	})
	r := mirrorEvery(t, c, cfg, log, partitions, n)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if logs.count("Started partition at initialOffset") != partitions {
		t.Errorf("want %d partitions started at initialOffset (a first start)", partitions)
	}
	if created.Load() == 0 {
		t.Errorf("the progress topic was never created")
	}
	if e, m := earlyCreate.Load(), earlyMeta.Load(); e != 0 || m != 0 {
		t.Errorf("before the first partition started: %d requests created progress topic %q and %d client metadata requests asked for it, want 0 and 0", e, topic, m)
	}
}
