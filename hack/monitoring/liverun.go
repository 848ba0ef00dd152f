package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Shape of the live run: a real engine mirroring one topic between two in-process Kafka
// clusters (kfake over TCP), serving /metrics on a loopback port.
const (
	liveTopic      = "orders"
	livePartitions = 3
	liveGroup      = "kafka-mirror.monitoring"
	// engineStartTimeout bounds how long the engine's /metrics takes to answer: a
	// generous ceiling for a busy machine, the engine usually serves in well under a second.
	engineStartTimeout = 60 * time.Second
	scrapeTimeout      = 10 * time.Second
)

// liveRun is a running engine and its two clusters.
type liveRun struct {
	source, target *kfake.Cluster
	producer       *kgo.Client
	metricsURL     string
	cancel         context.CancelFunc
	done           chan error
}

// startLiveRun starts the clusters and the engine, with a CEL filter that drops records
// whose key starts with "drop", so the handler metrics count something too.
func startLiveRun(log logr.Logger) (*liveRun, error) {
	r := &liveRun{done: make(chan error, 1)}
	var err error
	if r.source, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(livePartitions, liveTopic)); err != nil {
		return nil, fmt.Errorf("while starting the source cluster: %w", err)
	}
	if r.target, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(livePartitions, liveTopic)); err != nil {
		r.source.Close()
		return nil, fmt.Errorf("while starting the target cluster: %w", err)
	}
	if r.producer, err = kgo.NewClient(kgo.SeedBrokers(r.source.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		r.close()
		return nil, fmt.Errorf("while creating the producer: %w", err)
	}
	addr, err := freeAddress()
	if err != nil {
		r.close()
		return nil, err
	}
	cfg := &config.Config{
		Source:        config.Cluster{BootstrapServers: r.source.ListenAddrs()},
		Target:        config.Cluster{BootstrapServers: r.target.ListenAddrs()},
		ConsumerGroup: liveGroup,
		Topics:        config.Topics{Include: []string{regexp.QuoteMeta(liveTopic)}},
		SyncTopics:    config.BoolPtr(false),
		Handlers:      []config.HandlerSpec{{CEL: &config.CELHandler{Filter: `!string(record.key).startsWith("drop")`}}},
		Metrics:       config.Metrics{Address: addr},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		r.close()
		return nil, fmt.Errorf("while building the engine config: %w", err)
	}
	e, err := mirror.New(cfg, mirror.WithLogger(log))
	if err != nil {
		r.close()
		return nil, fmt.Errorf("while creating the engine: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- e.Run(ctx) }()
	r.metricsURL = "http://" + addr + "/metrics"
	deadline := time.Now().Add(engineStartTimeout)
	for {
		if _, err := r.scrape(); err == nil {
			return r, nil
		} else if time.Now().After(deadline) {
			r.close()
			return nil, fmt.Errorf("while waiting for the engine's /metrics: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freeAddress returns a loopback address with a port that was free a moment ago.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("while finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// produce writes n records of size bytes each to the source topic, round robin over its
// partitions; every dropEvery-th record (0: none) has a key the filter drops.
func (r *liveRun) produce(ctx context.Context, n, size, dropEvery int) error {
	value := make([]byte, size)
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		key := "k" + strconv.Itoa(i)
		if dropEvery > 0 && i%dropEvery == 0 {
			key = "drop" + strconv.Itoa(i)
		}
		recs = append(recs, &kgo.Record{Topic: liveTopic, Partition: int32(i % livePartitions), Key: []byte(key), Value: value})
	}
	if err := r.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("while producing to the source: %w", err)
	}
	return nil
}

// scrape reads the engine's /metrics.
func (r *liveRun) scrape() (string, error) {
	return scrapeURL(http.DefaultClient, r.metricsURL)
}

func scrapeURL(c *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// close stops the engine and the clusters; it returns the engine's error, if any.
func (r *liveRun) close() error {
	var err error
	if r.cancel != nil {
		r.cancel()
		if runErr := <-r.done; runErr != nil && !errors.Is(runErr, context.Canceled) {
			err = runErr
		}
	}
	if r.producer != nil {
		r.producer.Close()
	}
	if r.source != nil {
		r.source.Close()
	}
	if r.target != nil {
		r.target.Close()
	}
	return err
}
