package demo

import (
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
)

// clusters are the two Kafka clusters the demo mirrors between: embedded kfake
// clusters, or with Options.RealKafka two single-broker Apache Kafka clusters.
type clusters struct {
	source, target []string // bootstrap addresses
	kind           string   // what they are, for the story
	close          func()
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
	return &clusters{
		source: src.ListenAddrs(), target: dst.ListenAddrs(), kind: "embedded kfake brokers",
		close: func() { src.Close(); dst.Close() },
	}, nil
}

// startRealClusters starts a source and a target Apache Kafka cluster of one KRaft
// broker each (a JVM per broker, from the jars `make kafka` fetched), with their logs
// in a temporary directory removed when they are closed.
func startRealClusters(ctx context.Context) (*clusters, error) {
	dir, err := os.MkdirTemp("", "kafka-mirror-demo-kafka-")
	if err != nil {
		return nil, fmt.Errorf("while creating the clusters' directory: %w", err)
	}
	src, err := realkafka.Start(ctx, dir, realkafka.Options{Name: "source"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("while starting the source cluster: %w", err)
	}
	dst, err := realkafka.Start(ctx, dir, realkafka.Options{Name: "target"})
	if err != nil {
		src.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("while starting the target cluster: %w", err)
	}
	return &clusters{
		source: src.Addrs(), target: dst.Addrs(),
		kind: fmt.Sprintf("Apache Kafka %s, one KRaft broker each", realkafka.Version),
		close: func() {
			src.Close()
			dst.Close()
			_ = os.RemoveAll(dir)
		},
	}, nil
}
