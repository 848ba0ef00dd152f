package demo

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// clusters are the two embedded Kafka clusters the demo mirrors between.
type clusters struct {
	source *kfake.Cluster
	target *kfake.Cluster
}

// startClusters starts a source and a target kfake cluster, each listening on loopback
// ports chosen by the kernel so that several demos (or tests) can run side by side.
func startClusters(brokers int) (*clusters, error) {
	src, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.ClusterID("demo-source"))
	if err != nil {
		return nil, fmt.Errorf("while starting the source cluster: %w", err)
	}
	dst, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.ClusterID("demo-target"))
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("while starting the target cluster: %w", err)
	}
	return &clusters{source: src, target: dst}, nil
}

func (c *clusters) close() {
	c.source.Close()
	c.target.Close()
}
