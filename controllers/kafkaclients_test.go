package controllers

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// closeCountingAdmin is an admin whose Close is counted; nothing else of it is called
// by kafkaClients.
type closeCountingAdmin struct {
	sarama.ClusterAdmin
	closed *atomic.Int32
}

func (a closeCountingAdmin) Close() error { a.closed.Add(1); return nil }

// fakeDials returns kafkaClients that dial nothing, with counters of dials and closes.
func fakeDials() (*kafkaClients, *atomic.Int32, *atomic.Int32, *time.Time) {
	k := newKafkaClients()
	dials, closes := &atomic.Int32{}, &atomic.Int32{}
	now := time.Unix(1_000_000, 0)
	k.now = func() time.Time { return now }
	k.dial = func(config.Cluster, string, secretFiles) (sarama.Client, sarama.ClusterAdmin, error) {
		dials.Add(1)
		return nil, closeCountingAdmin{closed: closes}, nil
	}
	return k, dials, closes, &now
}

// eventually waits for the background closes of kafkaClients.
func eventuallyClosed(t *testing.T, closes *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for closes.Load() != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := closes.Load(); got != want {
		t.Fatalf("%d clients closed, want %d", got, want)
	}
}

func TestKafkaClientsCache(t *testing.T) {
	sasl := func(user string) config.Cluster {
		return config.Cluster{BootstrapServers: []string{"kafka:9092"},
			SASL: &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: user, PasswordFile: secretFilePath("source-sasl", passwordFile)}}
	}
	files := func(pw string) secretFiles {
		return secretFiles{secretFilePath("source-sasl", passwordFile): []byte(pw), secretFilePath("target-ca", caFile): []byte("ca")}
	}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}

	t.Run("mirrors on one cluster with the same credentials share one client", func(t *testing.T) {
		k, dials, closes, _ := fakeDials()
		for range 3 {
			for _, m := range []types.NamespacedName{a, b} {
				e, err := k.acquire(m, sasl("mirror"), kafka.RoleSource, files("pw"))
				if err != nil {
					t.Fatal(err)
				}
				k.release(e, false)
			}
		}
		expect(t, "dials", dials.Load(), int32(1))
		expect(t, "closes", closes.Load(), int32(0))
		expect(t, "cached", k.size(), 1)
	})

	t.Run("a key of another cluster's Secret does not split the cache", func(t *testing.T) {
		same := clusterIdentity(sasl("mirror"), kafka.RoleSource, files("pw"))
		other := files("pw")
		other[secretFilePath("target-ca", caFile)] = []byte("another ca")
		expect(t, "identity", clusterIdentity(sasl("mirror"), kafka.RoleSource, other), same)
	})

	t.Run("a credential change dials anew and closes the old client once unused", func(t *testing.T) {
		k, dials, closes, _ := fakeDials()
		e, _ := k.acquire(a, sasl("mirror"), kafka.RoleSource, files("old"))
		k.release(e, false)
		e, _ = k.acquire(b, sasl("mirror"), kafka.RoleSource, files("old"))
		k.release(e, false)
		// a moves to the new password: b still uses the old client.
		e, _ = k.acquire(a, sasl("mirror"), kafka.RoleSource, files("new"))
		k.release(e, false)
		expect(t, "dials", dials.Load(), int32(2))
		expect(t, "closes while b uses the old client", closes.Load(), int32(0))
		// b moves too: nobody uses the old client, it is closed now.
		e, _ = k.acquire(b, sasl("mirror"), kafka.RoleSource, files("new"))
		k.release(e, false)
		eventuallyClosed(t, closes, 1)
		expect(t, "dials", dials.Load(), int32(2))
		expect(t, "cached", k.size(), 1)
	})

	t.Run("a failed sync drops the client; the next sync dials", func(t *testing.T) {
		k, dials, closes, _ := fakeDials()
		e, _ := k.acquire(a, sasl("mirror"), kafka.RoleSource, files("pw"))
		k.release(e, true)
		eventuallyClosed(t, closes, 1)
		e, _ = k.acquire(a, sasl("mirror"), kafka.RoleSource, files("pw"))
		k.release(e, false)
		expect(t, "dials", dials.Load(), int32(2))
	})

	t.Run("an idle client is closed; one in use is not", func(t *testing.T) {
		k, _, closes, now := fakeDials()
		idle, _ := k.acquire(a, sasl("idle"), kafka.RoleSource, files("pw"))
		k.release(idle, false)
		busy, _ := k.acquire(b, sasl("busy"), kafka.RoleSource, files("pw"))
		*now = now.Add(kafkaClientIdle + time.Second)
		e, _ := k.acquire(a, sasl("other"), kafka.RoleTarget, files("pw")) // any acquire sweeps
		k.release(e, false)
		eventuallyClosed(t, closes, 1)
		k.release(busy, false)
		expect(t, "cached", k.size(), 2)
	})

	t.Run("a deleted mirror's clients are closed unless shared", func(t *testing.T) {
		k, _, closes, _ := fakeDials()
		e, _ := k.acquire(a, sasl("own"), kafka.RoleSource, files("pw"))
		k.release(e, false)
		e, _ = k.acquire(a, sasl("shared"), kafka.RoleTarget, files("pw"))
		k.release(e, false)
		e, _ = k.acquire(b, sasl("shared"), kafka.RoleTarget, files("pw"))
		k.release(e, false)
		k.forget(a)
		eventuallyClosed(t, closes, 1)
		expect(t, "cached", k.size(), 1)
	})
}

func TestRetryDelay(t *testing.T) {
	for failures, want := range map[int]time.Duration{0: minRetryDelay, 1: minRetryDelay, 2: 2 * minRetryDelay, 4: 8 * minRetryDelay, 100: maxRetryDelay} {
		expect(t, "retryDelay", retryDelay(failures), want)
	}
}

func TestSameOutcome(t *testing.T) {
	inSync := syncedTopics(topics.TopicState{Source: "a", Target: "a", SourcePartitions: 3, TargetPartitions: 3, Action: topics.ActionNone})
	created := syncedTopics(topics.TopicState{Source: "a", Target: "a", SourcePartitions: 3, TargetPartitions: 3, Action: topics.ActionCreated})
	refused := topicSyncResult{err: errors.New("connection refused"), role: kafka.RoleSource}
	tests := map[string]struct {
		prev, next topicSyncResult
		want       bool
	}{
		"nothing new":                {prev: inSync, next: inSync, want: true},
		"a topic created":            {prev: inSync, next: created, want: false},
		"the same error":             {prev: refused, next: refused, want: true},
		"another error":              {prev: refused, next: topicSyncResult{err: errors.New("timeout"), role: kafka.RoleSource}, want: false},
		"the same error, other role": {prev: refused, next: topicSyncResult{err: refused.err, role: kafka.RoleTarget}, want: false},
		"recovered":                  {prev: refused, next: inSync, want: false},
		"failed":                     {prev: inSync, next: refused, want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			expect(t, "sameOutcome", sameOutcome(tc.prev, tc.next), tc.want)
		})
	}
}
