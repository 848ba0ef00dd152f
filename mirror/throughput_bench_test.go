package mirror

import (
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// BenchmarkMirrorVsRawProducer compares the engine's steady-state rate (records acked
// per second once the first record is acked, so group join time is left out) with the
// rate of a bare sarama producer that has the same no-data-loss configuration and
// writes the same records to the same kind of target. The ratio is what the engine's
// overhead costs: reading the source, tracking offsets, committing. Run with -benchtime 2x.
func BenchmarkMirrorVsRawProducer(b *testing.B) {
	const partitions, perPartition = 8, 25_000
	const total = partitions * perPartition
	var mirrorTook, rawTook time.Duration
	var mirrorRecs int64
	for i := 0; i < b.N; i++ {
		c := newClusters(b, partitions)
		w := newWorkload(partitions)
		w.produce(b, c.source, perPartition)
		cfg := c.testConfig(b, func(cfg *config.Config) { cfg.Streams = 1 })

		// The raw producer writes to a second, fresh target the records the engine reads.
		raw := rawProduce(b, c, cfg, w, perPartition)
		rawTook += raw

		e, err := New(cfg, WithLogger(logr.Discard()), func(o *options) { o.tuneSarama = fastGroup })
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		ctx, cancel := contextWithCancel()
		go func() { _ = e.Run(ctx); close(done) }()
		for e.Stats().Records == 0 {
			time.Sleep(time.Millisecond)
		}
		began := time.Now()
		startRecs := e.Stats().Records
		for e.Stats().Records < total {
			time.Sleep(time.Millisecond)
		}
		mirrorTook += time.Since(began)
		mirrorRecs += total - startRecs
		cancel()
		<-done
	}
	mirrorRate := float64(mirrorRecs) / mirrorTook.Seconds()
	rawRate := float64(b.N*total) / rawTook.Seconds()
	b.ReportMetric(mirrorRate, "mirror-records/s")
	b.ReportMetric(rawRate, "raw-producer-records/s")
	b.ReportMetric(mirrorRate/rawRate, "mirror/raw")
}

func rawProduce(b *testing.B, c *testClusters, cfg *config.Config, w *workload, perPartition int) time.Duration {
	b.Helper()
	tgt := newClusters(b, 1).source // a fresh cluster to write to
	admin, err := sarama.NewClusterAdmin(tgt.ListenAddrs(), mustConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := admin.CreateTopic(testTopic+"-raw", &sarama.TopicDetail{NumPartitions: w.partitions, ReplicationFactor: 1}, false); err != nil {
		b.Fatal(err)
	}
	admin.Close()
	rawCfg := *cfg
	rawCfg.Target = config.Cluster{BootstrapServers: tgt.ListenAddrs()}
	pc, err := kafka.ProducerConfig(&rawCfg)
	if err != nil {
		b.Fatal(err)
	}
	p, err := sarama.NewAsyncProducer(tgt.ListenAddrs(), pc)
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]*sarama.ProducerMessage, 0, int(w.partitions)*perPartition)
	for i := 0; i < perPartition; i++ {
		for part := int32(0); part < w.partitions; part++ {
			r := w.record(part, i)
			m := &sarama.ProducerMessage{Topic: testTopic + "-raw", Partition: part, Timestamp: r.Timestamp}
			if r.Key != nil {
				m.Key = sarama.ByteEncoder(r.Key)
			}
			if r.Value != nil {
				m.Value = sarama.ByteEncoder(r.Value)
			}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
			}
			msgs = append(msgs, m)
		}
	}
	began := time.Now()
	go func() {
		for _, m := range msgs {
			p.Input() <- m
		}
	}()
	for range msgs {
		select {
		case <-p.Successes():
		case err := <-p.Errors():
			b.Fatal(err)
		}
	}
	took := time.Since(began)
	_ = p.Close()
	return took
}

func mustConfig(b *testing.B) *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	return sc
}

// BenchmarkExactlyOnceVsAtLeastOnce compares the engine's steady-state rate (records
// acked, or committed in transactions, per second once the first one is, so group join
// time is left out) in the two delivery modes, mirroring the same backlog of records
// from a fresh pair of clusters each. Run with -benchtime 1x.
func BenchmarkExactlyOnceVsAtLeastOnce(b *testing.B) {
	const partitions, perPartition = 8, 25_000
	const total = partitions * perPartition
	rate := func(delivery config.Delivery) float64 {
		c := newClusters(b, partitions)
		w := newWorkload(partitions)
		w.produce(b, c.source, perPartition)
		cfg := c.testConfig(b, func(cfg *config.Config) {
			cfg.Streams = 1
			cfg.Delivery = delivery
			cfg.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
		})
		e, err := New(cfg, WithLogger(logr.Discard()), func(o *options) { o.tuneSarama = fastGroup })
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		ctx, cancel := contextWithCancel()
		go func() { _ = e.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		for e.Stats().Records == 0 {
			time.Sleep(time.Millisecond)
		}
		began, startRecs := time.Now(), e.Stats().Records
		for e.Stats().Records < total {
			time.Sleep(time.Millisecond)
		}
		return float64(total-startRecs) / time.Since(began).Seconds()
	}
	var alo, eos float64
	for i := 0; i < b.N; i++ {
		alo += rate(config.DeliveryAtLeastOnce)
		eos += rate(config.DeliveryExactlyOnce)
	}
	b.ReportMetric(alo/float64(b.N), "atLeastOnce-records/s")
	b.ReportMetric(eos/float64(b.N), "exactlyOnce-records/s")
	b.ReportMetric(eos/alo, "exactlyOnce/atLeastOnce")
}
