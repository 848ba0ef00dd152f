//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// proxyServer is the one in-process toxiproxy every proxied cluster registers with.
var proxyServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	// Toxics log through zerolog's global logger, at trace level by default.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
})

// cluster is a kfake cluster whose every broker is reached only through a toxiproxy
// proxy: kfake advertises the proxy's address, so clients that bootstrap through the
// proxy keep going through it after reading metadata.
type cluster struct {
	name    string
	kf      *kfake.Cluster
	proxies []*toxiproxy.Proxy
	// clientOpts are what a test client needs to connect (SASL, TLS).
	clientOpts []kgo.Opt

	adminOnce sync.Once
	adminCl   *kgo.Client
}

// advertisedListener is a broker's real listener that reports the proxy's address, which
// is what kfake puts into metadata responses.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// newCluster starts a kfake cluster with brokers brokers behind one proxy each.
func newCluster(t *testing.T, name string, brokers int, opts ...kfake.Opt) *cluster {
	t.Helper()
	c := &cluster{name: name}
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		p := toxiproxy.NewProxy(proxyServer(), fmt.Sprintf("%s-%s-%d", t.Name(), name, len(c.proxies)), "127.0.0.1:0", ln.Addr().String())
		if err := p.Start(); err != nil {
			ln.Close()
			return nil, fmt.Errorf("while starting the proxy of %s: %w", name, err)
		}
		c.proxies = append(c.proxies, p)
		addr, err := net.ResolveTCPAddr("tcp", p.Listen)
		if err != nil {
			return nil, err
		}
		return advertisedListener{Listener: ln, addr: addr}, nil
	}
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.ListenFn(listen)}, opts...)...)
	if err != nil {
		t.Fatalf("starting the %s cluster: %v", name, err)
	}
	c.kf = kf
	t.Cleanup(func() {
		for _, p := range c.proxies {
			p.Stop()
		}
		kf.Close()
	})
	return c
}

// addrs are the proxied bootstrap addresses.
func (c *cluster) addrs() []string {
	var out []string
	for _, p := range c.proxies {
		out = append(out, p.Listen)
	}
	return out
}

// disable makes the cluster unreachable: every connection is cut and new ones refused.
func (c *cluster) disable() {
	for _, p := range c.proxies {
		p.Stop()
	}
}

// enable makes the cluster reachable again on the same addresses.
func (c *cluster) enable(t *testing.T) {
	t.Helper()
	for _, p := range c.proxies {
		if err := p.Start(); err != nil {
			t.Fatalf("re-enabling the %s proxy: %v", c.name, err)
		}
	}
}

// addToxic adds a toxic to every proxy of the cluster; it returns a function removing it.
// stream is "upstream" (client to broker) or "downstream" (broker to client).
func (c *cluster) addToxic(t *testing.T, name, typ, stream string, attrs string) func() {
	t.Helper()
	for _, p := range c.proxies {
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, name, typ, stream, attrs)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("adding toxic %s to %s: %v", name, c.name, err)
		}
	}
	return func() {
		for _, p := range c.proxies {
			_ = p.Toxics.RemoveToxic(context.Background(), name)
		}
	}
}

// admin returns the cluster's kgo client for admin requests through the proxy, created
// on first use and closed with the test.
func (c *cluster) admin(t *testing.T) *kgo.Client {
	t.Helper()
	c.adminOnce.Do(func() {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...)}, c.clientOpts...)...)
		if err != nil {
			t.Fatal(err)
		}
		c.adminCl = cl
		t.Cleanup(cl.Close)
	})
	return c.adminCl
}

// createTopics creates topics with their partition counts and configs.
func (c *cluster) createTopics(t *testing.T, topics map[string]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = n
		rt.ReplicationFactor = 1
		for k, v := range configs {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name = k
			rc.Value = kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(context.Background(), c.admin(t))
	if err != nil {
		t.Fatalf("creating topics on %s: %v", c.name, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("creating topic %s on %s: %v", rt.Topic, c.name, err)
		}
	}
}

// addPartitions grows topic to n partitions.
func (c *cluster) addPartitions(t *testing.T, topic string, n int32) {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic = topic
	rt.Count = n
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), c.admin(t))
	if err != nil {
		t.Fatalf("adding partitions to %s: %v", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("adding partitions to %s: %v", rt.Topic, err)
		}
	}
}

// deleteRecords deletes every record of topic/partition below offset.
func (c *cluster) deleteRecords(t *testing.T, topic string, partition int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition = partition
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), c.admin(t))
	if err != nil {
		t.Fatalf("deleting records of %s/%d: %v", topic, partition, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("deleting records of %s/%d: %v", rt.Topic, rp.Partition, err)
			}
		}
	}
}

// endOffsets returns the end offset of every partition of topics.
func (c *cluster) endOffsets(t *testing.T, topics map[string]int32) map[string]map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for topic, n := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < n; p++ {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.admin(t))
	if err != nil {
		t.Fatalf("listing end offsets on %s: %v", c.name, err)
	}
	out := map[string]map[int32]int64{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]int64{}
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("listing end offsets of %s/%d on %s: %v", rt.Topic, rp.Partition, c.name, err)
			}
			out[rt.Topic][rp.Partition] = rp.Offset
		}
	}
	return out
}

// committed returns the offsets group committed on the cluster, by topic and partition.
func (c *cluster) committed(t *testing.T, group string) map[string]map[int32]int64 {
	t.Helper()
	// Group serves versions up to 7, Groups versions 8 and later; kgo picks the version.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.admin(t))
	if err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	out := map[string]map[int32]int64{}
	add := func(topic string, partition int32, offset int64) {
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		if offset >= 0 {
			out[topic][partition] = offset
		}
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			add(rt.Topic, rp.Partition, rp.Offset)
		}
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			t.Fatalf("fetching the offsets of group %s: %v", group, err)
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				add(rt.Topic, rp.Partition, rp.Offset)
			}
		}
	}
	return out
}

// groupMembers returns the number of members of group and its state.
func (c *cluster) groupMembers(t *testing.T, group string) (int, string) {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.admin(t))
	if err != nil || len(resp.Groups) != 1 {
		return 0, fmt.Sprintf("unknown (%v)", err)
	}
	g := resp.Groups[0]
	return len(g.Members), g.State
}
