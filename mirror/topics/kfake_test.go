package topics

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// newCluster starts an in-process Kafka wire-protocol cluster, closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("starting kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// saramaConfig is a client config with short retries, so failure tests stay fast.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "topics-test"
	cfg.Admin.Retry.Max = 1
	cfg.Admin.Retry.Backoff = 20 * time.Millisecond
	cfg.Metadata.Retry.Max = 1
	cfg.Metadata.Retry.Backoff = 20 * time.Millisecond
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Net.DialTimeout = 2 * time.Second
	cfg.Net.ReadTimeout = 5 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	return cfg
}

func newAdmin(t *testing.T, c *kfake.Cluster) sarama.ClusterAdmin {
	t.Helper()
	a, err := sarama.NewClusterAdmin(c.ListenAddrs(), saramaConfig())
	if err != nil {
		t.Fatalf("creating cluster admin: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func createTopic(t *testing.T, a sarama.ClusterAdmin, name string, partitions int32, configs map[string]string) {
	t.Helper()
	d := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: -1}
	if len(configs) > 0 {
		d.ConfigEntries = map[string]*string{}
		for k, v := range configs {
			d.ConfigEntries[k] = &v
		}
	}
	if err := a.CreateTopic(name, d, false); err != nil {
		t.Fatalf("creating topic %q: %v", name, err)
	}
}

// partitionCounts returns every topic of a cluster with its partition count.
func partitionCounts(t *testing.T, a sarama.ClusterAdmin) map[string]int32 {
	t.Helper()
	md, err := a.DescribeTopics(nil)
	if err != nil {
		t.Fatalf("describing topics: %v", err)
	}
	out := map[string]int32{}
	for _, tm := range md {
		out[tm.Name] = int32(len(tm.Partitions))
	}
	return out
}

// topicConfig returns the value of one config of a topic as the cluster reports it.
func topicConfig(t *testing.T, a sarama.ClusterAdmin, topic, name string) string {
	t.Helper()
	res, err := a.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{name}}}, sarama.DescribeConfigsOptions{})
	if err != nil || len(res) != 1 || res[0].ErrorCode != sarama.ErrNoError {
		t.Fatalf("describing config %s of %q: %v %+v", name, topic, err, res)
	}
	for _, e := range res[0].Configs {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
