package topics

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

func TestLag(t *testing.T) {
	cluster := newCluster(t)
	admin := newAdmin(t, cluster)
	createTopic(t, admin, "orders", 3, nil)
	createTopic(t, admin, "payments", 1, nil)
	createTopic(t, admin, "untouched", 1, nil)

	cfg := saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	client, err := sarama.NewClient(cluster.ListenAddrs(), cfg)
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	defer client.Close()

	// Records per partition: orders/0 10, orders/1 5, orders/2 none, payments/0 4.
	produced := map[string][]int{"orders": {10, 5, 0}, "payments": {4}}
	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("creating producer: %v", err)
	}
	for topic, perPartition := range produced {
		for p, n := range perPartition {
			for range n {
				if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: int32(p), Value: sarama.StringEncoder("v")}); err != nil {
					t.Fatalf("producing to %s/%d: %v", topic, p, err)
				}
			}
		}
	}
	if err := producer.Close(); err != nil {
		t.Fatalf("closing producer: %v", err)
	}

	// payments/0 loses its first 3 records to retention; nothing is committed there, so
	// its lag counts from the log start, not from 0.
	if err := admin.DeleteRecords("payments", map[int32]int64{0: 3}); err != nil {
		t.Fatalf("deleting records: %v", err)
	}

	const group = "mirror-group"
	commit(t, client, group, map[string]map[int32]int64{"orders": {0: 7, 1: 5}})

	got, err := Lag(context.Background(), admin, client, group, []string{"orders", "payments"})
	if err != nil {
		t.Fatalf("Lag: %v", err)
	}
	want := map[string][]PartitionLag{
		"orders": {
			{Partition: 0, Committed: 7, HighWatermark: 10, Lag: 3},
			{Partition: 1, Committed: 5, HighWatermark: 5, Lag: 0},
			{Partition: 2, Committed: -1, HighWatermark: 0, Lag: 0},
		},
		"payments": {
			{Partition: 0, Committed: -1, HighWatermark: 4, Lag: 1},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lag:\n got %+v\nwant %+v", got, want)
	}

	// A group that never committed lags by everything still in the log.
	got, err = Lag(context.Background(), admin, client, "new-group", []string{"orders"})
	if err != nil {
		t.Fatalf("Lag of a new group: %v", err)
	}
	wantNew := []PartitionLag{
		{Partition: 0, Committed: -1, HighWatermark: 10, Lag: 10},
		{Partition: 1, Committed: -1, HighWatermark: 5, Lag: 5},
		{Partition: 2, Committed: -1, HighWatermark: 0, Lag: 0},
	}
	if !reflect.DeepEqual(got["orders"], wantNew) {
		t.Errorf("Lag of a new group:\n got %+v\nwant %+v", got["orders"], wantNew)
	}

	// With initialOffset latest, a partition the group never committed starts at its
	// end: the records already there are never mirrored, so they are no lag (the
	// engine reports 0 for it from its assignment on too).
	got, err = Lag(context.Background(), admin, client, "new-group", []string{"orders"}, WithUncommittedFromEnd())
	if err != nil {
		t.Fatalf("Lag of a new group starting at the end: %v", err)
	}
	wantLatest := []PartitionLag{
		{Partition: 0, Committed: -1, HighWatermark: 10, Lag: 0},
		{Partition: 1, Committed: -1, HighWatermark: 5, Lag: 0},
		{Partition: 2, Committed: -1, HighWatermark: 0, Lag: 0},
	}
	if !reflect.DeepEqual(got["orders"], wantLatest) {
		t.Errorf("Lag of a new group starting at the end:\n got %+v\nwant %+v", got["orders"], wantLatest)
	}
}

func TestLagErrors(t *testing.T) {
	cluster := newCluster(t)
	admin := newAdmin(t, cluster)
	client, err := sarama.NewClient(cluster.ListenAddrs(), saramaConfig())
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	defer client.Close()

	got, err := Lag(context.Background(), admin, client, "g", nil)
	if err != nil || len(got) != 0 {
		t.Errorf("Lag with no topics = %v, %v; want empty, nil", got, err)
	}
	_, err = Lag(context.Background(), admin, client, "g", []string{"missing"})
	if err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("Lag of a missing topic: error = %v, want one naming the topic", err)
	}
	if topics := partitionCounts(t, admin); topics["missing"] != 0 {
		t.Errorf("Lag created topic missing with %d partitions", topics["missing"])
	}
}

// commit stores offsets for group with a simple commit (no group membership), as tools
// that reset a group's offsets do.
func commit(t *testing.T, client sarama.Client, group string, offsets map[string]map[int32]int64) {
	t.Helper()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		t.Fatalf("finding coordinator of %q: %v", group, err)
	}
	req := sarama.NewOffsetCommitRequest(client.Config(), group)
	for topic, parts := range offsets {
		for p, off := range parts {
			req.AddBlock(topic, p, off, 0, "")
		}
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		t.Fatalf("committing offsets: %v", err)
	}
	for topic, parts := range resp.Errors {
		for p, kerr := range parts {
			if kerr != sarama.ErrNoError {
				t.Fatalf("committing %s/%d: %v", topic, p, kerr)
			}
		}
	}
}
