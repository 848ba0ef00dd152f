package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// engineSpec is one engine configuration the benchmark runs.
type engineSpec struct {
	// name labels the run in logs and file names.
	name string
	// noDataLoss is the config's noDataLoss.
	noDataLoss bool
	// filter, when set, is a CEL filter expression.
	filter string
	// maxInFlight is maxInFlightPerPartition; 0 means the default.
	maxInFlight int
	// streams is the config's streams; 0 means the default.
	streams int
	// maxInFlightBytes is the config's maxInFlightBytes; 0 means the default.
	maxInFlightBytes int64
	// partial means the source topic holds more records than the run waits for, so the
	// target may pass the wanted count between two polls without duplicates.
	partial bool
	// delivery is the config's delivery; "" means the default (atLeastOnce).
	delivery config.Delivery
	// maxInFlightRequests is producer.maxInFlightRequests; 0 means the default.
	maxInFlightRequests int
}

// engineConfig renders the config of one engine run: topic from source to target under
// the same name, a consumer group of its own (so it starts from the oldest offsets), no
// topic sync (the benchmark creates the target topic before the clock starts, as the
// operator does), and a metrics endpoint on metricsAddr.
func engineConfig(spec engineSpec, source, target []string, group, topic, metricsAddr string) (*config.Config, error) {
	c := &config.Config{
		Source:                  config.Cluster{BootstrapServers: source},
		Target:                  config.Cluster{BootstrapServers: target},
		ConsumerGroup:           group,
		Topics:                  config.Topics{Include: []string{regexp.QuoteMeta(topic)}},
		SyncTopics:              config.BoolPtr(false),
		NoDataLoss:              config.BoolPtr(spec.noDataLoss),
		Streams:                 spec.streams,
		MaxInFlightPerPartition: spec.maxInFlight,
		MaxInFlightBytes:        spec.maxInFlightBytes,
		Delivery:                spec.delivery,
		Metrics:                 config.Metrics{Address: metricsAddr},
	}
	if spec.maxInFlightRequests > 0 {
		c.Producer = &config.Producer{MaxInFlightRequests: spec.maxInFlightRequests}
	}
	if spec.filter != "" {
		c.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: spec.filter}}}
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("while building the %s engine config: %w", spec.name, err)
	}
	return c, nil
}

// startEngine writes c to dir and starts `bin... run --config` on it, with its log in
// dir and env added to its environment. bin is the command and its leading arguments
// (the profile pass re-runs the benchmark binary with profile flags). Running the engine
// apart from the clusters gives its own CPU time and peak RSS, which an in-process run
// could not separate from kfake's.
func startEngine(bin, env []string, dir, name string, c *config.Config) (*engineproc.Process, error) {
	data, err := config.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("while rendering the %s engine config: %w", name, err)
	}
	cfgPath := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return nil, fmt.Errorf("while writing the %s engine config: %w", name, err)
	}
	args := append(append([]string{}, bin[1:]...), "run", "--config", cfgPath, "--log-format", "json", "--log-level", "info")
	cmd := exec.Command(bin[0], args...)
	cmd.Env = append(os.Environ(), env...)
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: filepath.Join(dir, name+".log")})
	if err != nil {
		return nil, fmt.Errorf("while starting the %s engine: %w", name, err)
	}
	return p, nil
}

// launch starts the engine command bin for spec, mirroring topic to target, on a free
// loopback metrics address, as the run named run; it returns the process and that
// address.
func (b *bench) launch(bin []string, spec engineSpec, run, topic string, target []string) (*engineproc.Process, string, error) {
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		return nil, "", err
	}
	name := b.runName(run)
	cfg, err := engineConfig(spec, b.srcBrokers, target, "bench-"+name, topic, addr)
	if err != nil {
		return nil, "", err
	}
	p, err := startEngine(bin, b.o.engineEnv, b.workDir, name, cfg)
	return p, addr, err
}

// usage is what the kernel counted for the engine process.
type usage struct {
	// CPU is user plus system time.
	CPU time.Duration
	// MaxRSS is the peak resident set size in bytes, as last sampled before the stop
	// signal (see engineproc.Process.PeakRSS).
	MaxRSS int64
	// MaxAnonRSS is the highest anonymous RSS sampled (engineproc.Process.PeakAnonRSS):
	// MaxRSS without the binary's file-backed pages.
	MaxAnonRSS int64
	// ExitErr is the process's exit error after the stop signal (nil for a clean exit).
	ExitErr error
}

// stopEngine sends sig (SIGTERM for a clean stop, SIGKILL when a drain would only cost
// time), kills the process if it is still running after grace, and returns its usage.
func stopEngine(p *engineproc.Process, sig syscall.Signal, grace time.Duration) usage {
	var err error
	if sig == syscall.SIGKILL {
		_ = p.Kill()
	} else {
		err = p.Stop(grace)
	}
	return usage{ExitErr: err, MaxRSS: p.PeakRSS(), MaxAnonRSS: p.PeakAnonRSS(), CPU: p.CPUTime()}
}

// logTailLines is how many lines of an engine's log an error quotes.
const logTailLines = 15

// targetCounter reads how many records a target topic holds: the sum of its partitions'
// end offsets. A fresh target per run makes that the number of records the engine wrote.
type targetCounter struct {
	client     sarama.Client
	topic      string
	partitions int32
}

func newTargetCounter(brokers []string, topic string, partitions int32) (*targetCounter, error) {
	sc, err := kafka.NewConfig(config.Cluster{BootstrapServers: brokers})
	if err != nil {
		return nil, err
	}
	cl, err := sarama.NewClient(brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("while connecting the target counter: %w", err)
	}
	return &targetCounter{client: cl, topic: topic, partitions: partitions}, nil
}

// recordCounter reads how many records a target topic holds; seenAt is when that count
// was true (the middle of the request's round trip for a far target).
type recordCounter interface {
	count() (n int64, seenAt time.Time, err error)
}

func (t *targetCounter) count() (int64, time.Time, error) {
	n, err := t.sum()
	return n, time.Now(), err
}

func (t *targetCounter) sum() (int64, error) {
	var sum int64
	for p := int32(0); p < t.partitions; p++ {
		o, err := t.client.GetOffset(t.topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, fmt.Errorf("while reading the end offset of target %s/%d: %w", t.topic, p, err)
		}
		sum += o
	}
	return sum, nil
}

func (t *targetCounter) close() { _ = t.client.Close() }

// progress is the target's record count over one engine run.
type progress struct {
	// firstAt is when the first record was seen on the target, relative to the start;
	// firstCount is the count seen then.
	firstAt    time.Duration
	firstCount int64
	// doneAt is when the target held every expected record.
	doneAt time.Duration
	// lowAt and highAt are when the target first held steadyFrom and steadyTo of the
	// expected records, lowCount and highCount the counts seen then: the window of the
	// steady rate, past the start and before the tail.
	lowAt, highAt       time.Duration
	lowCount, highCount int64
}

// The steady-state window of a run, as fractions of its records: the start (process,
// group join, first fetches) is before it and the last partitions' tail after it.
const (
	steadyFrom = 0.1
	steadyTo   = 0.9
)

// pollInterval is how often the target's end offsets are read during a run: often
// enough that the timing error is well under 1% of a default run.
const pollInterval = 50 * time.Millisecond

// waitForRecords polls the target until it holds want records, the engine exits, or ctx
// ends. More than want records are duplicates unless partial. onHalf, if not nil, is
// called once when the target holds half of them.
func waitForRecords(ctx context.Context, p *engineproc.Process, t recordCounter, want int64, partial bool, onHalf func()) (progress, error) {
	var pr progress
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return pr, ctx.Err()
		case <-p.Done():
			return pr, p.ExitedError()
		case <-tick.C:
		}
		n, seenAt, err := t.count()
		if err != nil {
			continue // the topic's leader may not be known yet; the next poll retries
		}
		now := seenAt.Sub(p.Started())
		if n > 0 && pr.firstAt == 0 {
			pr.firstAt, pr.firstCount = now, n
		}
		if pr.lowAt == 0 && float64(n) >= steadyFrom*float64(want) {
			pr.lowAt, pr.lowCount = now, n
		}
		if pr.highAt == 0 && float64(n) >= steadyTo*float64(want) {
			pr.highAt, pr.highCount = now, n
		}
		if onHalf != nil && n >= want/2 {
			onHalf()
			onHalf = nil
		}
		if n >= want {
			pr.doneAt = now
			if n > want && !partial {
				return pr, fmt.Errorf("the target holds %d records, %d more than the source: duplicates", n, n-want)
			}
			return pr, nil
		}
	}
}

// scrapeTimeout bounds one scrape of an engine's metrics.
const scrapeTimeout = 2 * time.Second

// scrape reads the engine's metrics endpoint.
func scrape(ctx context.Context, address string) (engineproc.Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	return engineproc.Scrape(ctx, nil, address)
}
