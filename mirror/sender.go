package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/pipeline"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// sender owns the way from a built record to the target's ack: the batching producers
// (a pool, see poolIndex) and the single-record producer and their clients (see
// sizeLimits), the target
// topics' readiness (targetTopics), the size limits, the in-flight byte budget and the
// outMsg pool. It hands records to the producers (admit, send), reads their results
// (readAcks) and reports a send that finally failed through fail; once failed is
// closed it hands nothing more over.
type sender struct {
	cfg       *config.Config
	log       logr.Logger
	kafkaOpts []kafka.Option
	preserve  bool
	metrics   *metrics
	// fail is Engine.fail; failed is closed on the engine's first fatal error.
	fail   func(error)
	failed <-chan struct{}

	// Set by openProducers before the streams start: the batching producers and
	// their clients (producers[i] sends through clients[i]), the single-record
	// producer (see sizeLimits) and its client.
	producers    []sarama.AsyncProducer
	clients      []sarama.Client
	single       sarama.AsyncProducer
	singleClient sarama.Client
	targets      *targetTopics
	limits       *sizeLimits
	budget       *inFlightBudget
	// records bounds the records in flight in the process (inFlightRecordsFor), as
	// budget bounds their bytes.
	records *inFlightBudget

	// free keeps acked outMsgs for the claims to reuse (see outFreeList).
	free outFreeList

	// syncs records where acked records landed (offset syncs); nil when groups is unset.
	syncs *offsetSyncWriter

	// unreadReported holds the size limits last reported unreadable (readLimits), so
	// that each is logged once, not every topic sync interval; only the topic loop uses it.
	unreadReported map[string]bool

	sendErrors atomic.Int64
	// resent counts records sent again alone after their batch was refused as too large.
	resent atomic.Int64
}

func newSender(cfg *config.Config, log logr.Logger, kafkaOpts []kafka.Option, m *metrics, fail func(error), failed <-chan struct{}) *sender {
	s := &sender{
		cfg:       cfg,
		log:       log,
		kafkaOpts: kafkaOpts,
		preserve:  cfg.Partitioning == config.PartitioningPreserve,
		metrics:   m,
		fail:      fail,
		failed:    failed,
		limits:    &sizeLimits{override: cfg.ProducerMaxMessageBytes()},
		budget:    newInFlightBudget(inFlightBytesFor(cfg.MaxInFlightBytes, cgroupMemoryMax)),
		records:   newInFlightBudget(inFlightRecordsFor(cfg.MaxInFlightPerPartition)),
	}
	return s
}

// isFailed reports whether a fatal error (or Abort) happened.
func (s *sender) isFailed() bool {
	select {
	case <-s.failed:
		return true
	default:
		return false
	}
}

// readAllAcks reads the results of every producer until they are closed. The
// single-record producer is closed only once the batching ones returned everything: a
// batch the target refused as too large is sent again through it (resendAlone).
func (s *sender) readAllAcks() {
	singleDone := make(chan struct{})
	go func() { defer close(singleDone); s.readAcks(s.single) }()
	var batching sync.WaitGroup
	for _, p := range s.producers {
		batching.Add(1)
		go func() { defer batching.Done(); s.readAcks(p) }()
	}
	batching.Wait()
	s.single.AsyncClose()
	<-singleDone
}

// closeBatching starts closing the batching producers: each flushes what it holds and
// closes its results channels once the target answered (readAllAcks then returns).
func (s *sender) closeBatching() {
	for _, p := range s.producers {
		p.AsyncClose()
	}
}

// poolIndex chooses the batching producer of a source partition's records. A claim
// sends all its records through the same one, so the order of a source partition's
// records on every target partition holds as with one producer, whatever the
// partitioning (preserve, hash, round robin, or a handler's choice), and a target
// partition written from one source partition (preserve, no handler) is owned by one
// producer: its idempotence sequence is that producer's alone. The choice is fixed
// for the process, so a partition never moves between batching producers: across a
// rebalance that gives the partition back, records the drain left in flight are ahead
// of the new claim's in the same producer. Consecutive partitions of a topic go to
// consecutive producers, so a topic's partitions spread evenly.
func (s *sender) poolIndex(topic string, partition int32) int {
	n := len(s.producers)
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	return int((uint64(h.Sum32()) + uint64(uint32(partition))) % uint64(n))
}

// outMsg is one record on its way to the target: the producer message and what the
// ack needs to find its source offset. It is reused (outFreeList), and the message's
// Metadata points back to it, so a record costs no allocation once the engine runs.
// Key and value encoders live here so that setting them allocates nothing.
type outMsg struct {
	msg     sarama.ProducerMessage
	key     sarama.ByteEncoder
	value   sarama.ByteEncoder
	headers []sarama.RecordHeader

	part    *partitionState
	tracker *offsets.Tracker
	ticket  offsets.Ticket
	// sourceOffset is kept for the error message of a failed send.
	sourceOffset int64
	sourceTime   time.Time
	readAt       time.Time
	size         int64
	// via is the producer that sends it, and pool which batching producer when via is
	// routeBatch (its claim's: sender.poolIndex); budgeted is what it took from the
	// byte budget (see sender.admit).
	via      route
	pool     int
	budgeted int64
}

// reset drops o's references to record bytes and readies it for reuse.
func (o *outMsg) reset() {
	clear(o.headers)
	*o = outMsg{headers: o.headers[:0]}
}

// outFreeList keeps acked outMsgs for reuse. It replaced a sync.Pool, which every
// garbage collection empties (the next records allocate again) and which cost a pool
// operation per record on each side: 3-4% of the engine's CPU in the profile of a
// 1M-record run (docs/performance.md). outMsgs move between the shared list and a
// goroutine's own cache outFreeBatch at a time, so the lock is taken once per batch:
// each claim takes from it (claimState.getOut), each ack reader gives back to it
// (readAcks).
type outFreeList struct {
	mu   sync.Mutex
	list []*outMsg
}

const (
	// outFreeBatch is how many outMsgs move between a goroutine's cache and the shared
	// list at a time.
	outFreeBatch = 128
	// outFreeKeep bounds the shared list (about 7 MiB of idle outMsgs): past a burst
	// with more records in flight, the surplus is left to the collector.
	outFreeKeep = 1 << 14
)

// take moves up to outFreeBatch outMsgs from the list to dst.
func (f *outFreeList) take(dst []*outMsg) []*outMsg {
	f.mu.Lock()
	n := min(len(f.list), outFreeBatch)
	rest := len(f.list) - n
	dst = append(dst, f.list[rest:]...)
	clear(f.list[rest:])
	f.list = f.list[:rest]
	f.mu.Unlock()
	return dst
}

// give adds reset outMsgs to the list, as many as it has room for.
func (f *outFreeList) give(msgs []*outMsg) {
	f.mu.Lock()
	if room := outFreeKeep - len(f.list); room > 0 {
		f.list = append(f.list, msgs[:min(room, len(msgs))]...)
	}
	f.mu.Unlock()
}

// setKeyValue sets the message's key and value, keeping null (nil) apart from empty.
func (o *outMsg) setKeyValue(key, value []byte) {
	o.msg.Key, o.msg.Value = nil, nil
	if key != nil {
		o.key = key
		o.msg.Key = &o.key
	}
	if value != nil {
		o.value = value
		o.msg.Value = &o.value
	}
	o.size = int64(len(key) + len(value))
}

// send hands o to the producer. It waits while the producer's input is full (the
// target is slower than the source, or hangs) but gives up when ctx ends (the drain
// of the claim's session ended: claimState.sendCtx) or the engine fails or is aborted. A record
// not handed over stays un-acked in its tracker, so its offset is never committed and
// the partition's next owner reads it again; the caller counts it (claimState.unsent)
// so the drain does not wait for it.
func (s *sender) send(ctx context.Context, o *outMsg) bool {
	o.msg.Metadata = o
	in := s.producers[o.pool].Input()
	if o.via == routeSingle {
		in = s.single.Input()
	}
	// The fast path: a producer with room takes the record without a select over three
	// channels (which locks each of them); a failed engine hands nothing more over.
	select {
	case <-s.failed:
		return false
	default:
	}
	select {
	case in <- &o.msg:
		return true
	default:
	}
	select {
	case in <- &o.msg:
		return true
	case <-ctx.Done():
		return false
	case <-s.failed:
		return false
	}
}

// ackClockReuse bounds how many acks in a row share one reading of the clock while
// the producer's results queue up (see readAcks).
const ackClockReuse = 256

// readAcks turns producer results into tracker acks until the producer is closed.
//
// Successes and errors are read by two goroutines, as sarama's examples do: errors are
// rare, and a select over both channels, which locks each of them on every wait, cost
// the ack reader a third of its CPU (docs/performance.md). The errors are still handled
// in order, on one goroutine, and readAcks returns only when both channels are closed
// and every error was handled (resendAlone included).
//
// The clock is read once per burst rather than once per record (it was 2% of the
// engine's CPU): when the results channel was empty before a receive, and at least
// every ackClockReuse acks. Results waiting behind the first arrived no later than it.
//
// Acks are handed over a run at a time (ackRun): the results of a produce response
// come a partition after the other, and a run of one partition's acks takes its
// tracker's lock, its counters and histograms and the two budgets once. A run ends
// before the reader waits for more results, so no ack is held back while the producer
// is idle, and a drain or a commit waits for nothing but the target.
func (s *sender) readAcks(producer sarama.AsyncProducer) {
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for pe := range producer.Errors() {
			s.sendFailed(pe)
		}
	}()
	succ := producer.Successes()
	var now time.Time
	reuse := 0
	run := &ackRun{tickets: make([]offsets.Ticket, 0, outFreeBatch)}
	freed := make([]*outMsg, 0, outFreeBatch)
	for {
		if len(succ) == 0 {
			reuse = 0
			run.end(s)
		}
		m, ok := <-succ
		if !ok {
			break
		}
		if reuse == 0 {
			now, reuse = time.Now(), ackClockReuse
		}
		reuse--
		o := m.Metadata.(*outMsg)
		if o.tracker != run.tracker || len(run.tickets) == cap(run.tickets) {
			run.end(s)
		}
		if s.syncs != nil && o.msg.Offset >= 0 {
			s.syncs.observe(o.part, o.tracker, o.sourceOffset, o.msg.Offset)
		}
		run.add(o, now)
		o.reset()
		if freed = append(freed, o); len(freed) == cap(freed) {
			s.free.give(freed)
			clear(freed)
			freed = freed[:0]
		}
	}
	run.end(s)
	<-errsDone
}

// ackRun is a run of acked records of one tracker (one source partition's assignment),
// not yet handed to it: their tickets, and what they add to the partition's counters
// and histograms and give back to the in-flight budgets.
type ackRun struct {
	part     *partitionState
	tracker  *offsets.Tracker
	tickets  []offsets.Ticket
	bytes    int64
	budgeted int64
	latency  durationCounts
	age      durationCounts
}

// add counts o, acked by the target at now, in the run; o must be of the run's
// tracker unless the run is empty.
func (r *ackRun) add(o *outMsg, now time.Time) {
	if len(r.tickets) == 0 {
		r.part, r.tracker = o.part, o.tracker
	}
	r.tickets = append(r.tickets, o.ticket)
	r.bytes += o.size
	r.budgeted += o.budgeted
	r.latency.observe(o.part.latency, now.Sub(o.readAt))
	if !o.sourceTime.IsZero() {
		r.age.observe(o.part.age, max(now.Sub(o.sourceTime), 0))
	}
}

// end hands the run to its partition and tracker and gives its share of the budgets
// back, in the order a single ack did: counters first, then the tracker (the commit
// point moves), then the budgets (the claims may read more).
func (r *ackRun) end(s *sender) {
	n := int64(len(r.tickets))
	if n == 0 {
		return
	}
	p := r.part
	p.records.Add(n)
	p.bytes.Add(r.bytes)
	p.latency.add(&r.latency)
	p.age.add(&r.age)
	r.tracker.AckAll(r.tickets)
	s.records.release(n)
	s.budget.release(r.budgeted)
	r.tickets = r.tickets[:0]
	r.part, r.tracker, r.bytes, r.budgeted = nil, nil, 0, 0
}

// sendFailed stops the engine: the record stays un-acked, so no commit passes it, and
// the restarted engine sends it again.
//
// The producer hands a record back only when no retry can help (the target refused it
// for good, for example as too large or not authorised) or after retrying it for at
// least deliveryTimeout (kafka.ProducerConfig: produce retries and leader lookups both
// back off for that long, in order). A refusal is not retried by the engine: sarama's
// idempotent producer bumps its epoch after it and goes on with the batches already
// queued behind it, so later records of the same partition may reach the target before
// the engine stops. Nothing is lost, but after the restart those records are on the
// target twice, the first copies before the refused record.
//
// A batch of several records refused as too large is the engine's problem, not the
// records': it is never fatal, its records are sent again one by one (resendAlone).
func (s *sender) sendFailed(pe *sarama.ProducerError) {
	if o, ok := pe.Msg.Metadata.(*outMsg); ok && o.via == routeBatch && errors.Is(pe.Err, sarama.ErrMessageSizeTooLarge) && !s.isFailed() {
		s.resendAlone(o)
		return
	}
	s.sendErrors.Add(1)
	s.metrics.sendErrors.Inc()
	o, ok := pe.Msg.Metadata.(*outMsg)
	if !ok {
		s.fail(fmt.Errorf("while writing to target topic %q partition %d: %w", pe.Msg.Topic, pe.Msg.Partition, pe.Err))
		return
	}
	s.release(o)
	if errors.Is(pe.Err, sarama.ErrMessageSizeTooLarge) {
		limit, _ := s.limits.limit(pe.Msg.Topic)
		s.fail(fmt.Errorf("while writing source record %s/%d offset %d to target topic %q partition %d: the target refused a record batch of this record alone "+
			"(%d bytes at most; limit known to the engine %d, 0 when unknown): %w",
			o.part.topic, o.part.partition, o.sourceOffset, pe.Msg.Topic, pe.Msg.Partition, pe.Msg.ByteSize(2)+recordBatchOverhead, limit, pe.Err))
		return
	}
	s.fail(fmt.Errorf("while writing source record %s/%d offset %d to target topic %q partition %d (read %v ago): %w",
		o.part.topic, o.part.partition, o.sourceOffset, pe.Msg.Topic, pe.Msg.Partition, time.Since(o.readAt).Round(time.Millisecond), pe.Err))
}

// readLimits reads the size limits of targets and of every topic a record went to
// without a known limit, and stores them. A failure keeps the limits known so far.
func (s *sender) readLimits(admin sarama.ClusterAdmin, targets []string) error {
	if s.limits.override > 0 {
		return nil
	}
	m, err := topics.ReadMessageLimits(admin, s.limits.topicsToDescribe(targets))
	if err != nil {
		return err
	}
	s.reportUnread(m.Unread)
	for t := range m.Topics {
		s.limits.unknown.Delete(t)
		s.limits.distrusted.Delete(t)
	}
	s.limits.set(m)
	return nil
}

// idempotenceRefusal names the missing ACL when the target refused the idempotent
// producer's InitProducerId (CLUSTER_AUTHORIZATION_FAILED): Kafka grants it with
// IdempotentWrite on the cluster, or (2.8 and later) with Write on any topic, so a
// principal without Write on the target topics is refused before its first record.
func (s *sender) idempotenceRefusal(err error) error {
	if !errors.Is(err, sarama.ErrClusterAuthorizationFailed) {
		return err
	}
	return fmt.Errorf("%s, which the idempotent producer needs (noDataLoss): grant Write on the target topics "+
		"(which implies it on Kafka 2.8 and later) or IdempotentWrite on the cluster: %w",
		kafka.NotAuthorized(kafka.RoleTarget, kafka.Principal(s.cfg.Target), "IDEMPOTENT_WRITE", "CLUSTER", kafka.ClusterResource), err)
}

// reportUnread logs each size limit that could not be read (a refused DescribeConfigs
// above all) once, until it can be read again: the engine goes on with the broker's or
// Kafka's default in its place, and a target topic whose real limit is smaller refuses
// the batches above it (each record is then sent alone).
func (s *sender) reportUnread(unread []error) {
	now := make(map[string]bool, len(unread))
	principal := kafka.Principal(s.cfg.Target)
	for _, err := range unread {
		msg := err.Error()
		now[msg] = true
		if s.unreadReported[msg] {
			continue
		}
		hint := "the engine assumes the broker's (or Kafka's default) limit in its place"
		if topics.IsAuthorization(err) {
			hint += "; grant the target principal DescribeConfigs on the cluster and on the target topics (AlterConfigs on them implies it; docs/security.md)"
		}
		s.log.Error(err, "Cannot read a record size limit (max.message.bytes or message.max.bytes) of the target; "+hint,
			"cluster", kafka.RoleTarget, "principal", principal)
	}
	s.unreadReported = now
}

// openProducers makes the producers towards the target (see sizeLimits), after the
// first topic loop read the limits of the mirrored topics (targets: the target names
// of the selected source topics): producer.producers batching ones (one with delivery
// exactlyOnce, whose transactional producers send the records) and the single-record
// one. Each has a client of its own, so each has its own connection, and its own
// request in flight, to every broker. They are made concurrently (each client
// connects, each idempotent producer asks for its producer ID); what was made is in c
// even when one failed, for the caller to close.
func (s *sender) openProducers(c *connections, targets []string) error {
	s.limits.batchCap = s.limits.capForBatches(targets)
	n := s.cfg.BatchProducers()
	if s.cfg.ExactlyOnce() {
		n = 1
	}
	c.producers, c.clients = make([]sarama.AsyncProducer, n), make([]sarama.Client, n)
	seeds := brokerAddrs(c.targetMeta)
	var g errgroup.Group
	for i := range n {
		g.Go(func() (err error) {
			c.clients[i], c.producers[i], err = s.openProducer(s.limits.batchCap, 0, seeds)
			return err
		})
	}
	g.Go(func() (err error) {
		c.singleClient, c.single, err = s.openProducer(maxProducibleBytes, 1, seeds)
		if err != nil {
			return fmt.Errorf("single-record producer: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	s.producers, s.clients, s.single, s.singleClient = c.producers, c.clients, c.single, c.singleClient
	s.targets = newTargetTopics(c.clients, c.targetMeta, s.preserve)
	s.log.Info("Sized record batches by the target topics' max.message.bytes", "batchBytes", s.limits.batchCap,
		"targetTopics", len(targets), "batchingProducers", n, "maxInFlightRequests", s.pipelined(), "maxInFlightBytes", s.budget.limit, "maxInFlightRecords", s.records.limit)
	return nil
}

// warmProducers readies the batching producers for their first records while the
// streams join the group: each producer's client reads the target topics' metadata and
// connects to their partitions' leaders (sarama's Leader opens the connection), which
// targetTopics.check and the first produce request would otherwise do after the join,
// a round trip each across a distance. Only topics whose every partition has a leader
// in probe's metadata (the topic loop's view) are asked for: the producers' metadata
// refresh retries while a partition has no leader (kafka.keepLookingForLeaders), and a
// warm-up must not hold a client that long. What it could not do, the first record's
// check does, as before.
func (s *sender) warmProducers(probe sarama.Client, targets []string) {
	var ready []string
	for _, t := range targets {
		parts, err := probe.Partitions(t)
		writable, werr := probe.WritablePartitions(t)
		if err == nil && werr == nil && len(parts) > 0 && len(writable) == len(parts) {
			ready = append(ready, t)
		}
	}
	if len(ready) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, client := range s.clients {
		wg.Go(func() {
			if client.RefreshMetadata(ready...) != nil {
				return
			}
			for _, t := range ready {
				parts, _ := client.Partitions(t)
				for _, p := range parts {
					_, _ = client.Leader(t, p)
				}
			}
		})
	}
	wg.Wait()
}

// brokerAddrs returns the addresses of the brokers in client's metadata: the target's
// registered brokers when the engine connected, which the producers' clients start
// from rather than the configured bootstrap servers. A bootstrap server that is dead,
// hangs (accepts connections and never answers) or is no longer the cluster's is not
// among them; sarama would send a producer's first request to one of its seeds,
// chosen at random, and retry that same one (see kafka.startFromALiveSeed).
func brokerAddrs(client sarama.Client) []string {
	if client == nil {
		return nil
	}
	var addrs []string
	for _, b := range client.Brokers() {
		addrs = append(addrs, b.Addr())
	}
	return addrs
}

// openProducer makes one producer towards the target and its client: batches of up to
// maxBytes, and of at most maxMessages records when it is not 0; its client starts from
// seeds when there are any, else from the configured bootstrap servers. It returns the
// client even when the producer failed, for the caller to close.
func (s *sender) openProducer(maxBytes, maxMessages int, seeds []string) (sarama.Client, sarama.AsyncProducer, error) {
	inFlight := s.pipelined()
	if maxMessages > 0 {
		inFlight = 1 // the single-record producer stays sarama's
	}
	pc, err := kafka.ProducerConfig(s.cfg, s.kafkaOpts...)
	if inFlight > 1 {
		pc, err = kafka.PipelinedProducerConfig(s.cfg, inFlight, s.kafkaOpts...)
	}
	if err != nil {
		return nil, nil, err
	}
	pc.Producer.MaxMessageBytes = maxBytes
	pc.Producer.Flush.MaxMessages = maxMessages
	if maxMessages > 0 {
		// A batch never reaches a producer.flushMessages above its cap (sarama refuses
		// that config): it is full, and sent, at the cap.
		pc.Producer.Flush.Messages = min(pc.Producer.Flush.Messages, maxMessages)
	}
	target := s.cfg.Target
	if len(seeds) > 0 {
		target.BootstrapServers = seeds
	}
	client, err := kafka.NewClientFromConfig(target, pc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, s.kafkaOpts...)...)
	if err != nil {
		return nil, nil, err
	}
	var producer sarama.AsyncProducer
	if inFlight > 1 {
		producer, err = pipeline.New(client, pipeline.Options{MaxInFlight: inFlight, DeliveryTimeout: s.cfg.DeliveryTimeout.Duration, Backoff: kafka.RetryBackoff})
	} else {
		producer, err = sarama.NewAsyncProducerFromClient(client)
	}
	if err != nil {
		return client, nil, fmt.Errorf("while creating a producer for the target cluster: %w", s.idempotenceRefusal(err))
	}
	return client, producer, nil
}

// pipelined returns producer.maxInFlightRequests when the batching producers are the
// engine's pipelined ones (no-data-loss, not exactly-once), 1 when they are sarama's.
func (s *sender) pipelined() int {
	if !s.cfg.NoDataLossEnabled() || s.cfg.ExactlyOnce() {
		return 1
	}
	return s.cfg.MaxInFlightRequests()
}

// admit readies a source record's outputs for sending: it chooses their producer
// (all go through the same one), waits, when the claim switches producers, until
// everything it sent through the other one was acked (so order within the partition
// holds), and takes their bytes from the in-flight budget. It returns a
// recordTooLargeError for an output no batch can carry, or ctx's error; then nothing
// was taken.
func (s *sender) admit(ctx context.Context, c *claimState, outs []*outMsg) error {
	r := routeBatch
	var bytes int64
	for _, o := range outs {
		size := o.msg.ByteSize(2)
		or, err := s.limits.routeFor(o, size)
		if err != nil {
			return err
		}
		r = max(r, or)
		o.budgeted = int64(size)
		bytes += o.budgeted
	}
	if r != c.via && c.tracker.InFlight() > 0 {
		if err := c.tracker.WaitBelow(ctx, 1); err != nil {
			return err
		}
	}
	c.via = r
	if r == routeSingle {
		for _, o := range outs {
			if err := s.singleProducerKnows(ctx, o.msg.Topic, o.msg.Partition); err != nil {
				return err
			}
		}
	}
	for _, o := range outs {
		o.via, o.pool = r, c.pool
	}
	if err := s.records.acquire(ctx, s.failed, int64(len(outs))); err != nil {
		return err
	}
	if err := s.budget.acquire(ctx, s.failed, bytes); err != nil {
		s.records.release(int64(len(outs)))
		return err
	}
	return nil
}

// release gives back what o took from the in-flight budgets (admit).
func (s *sender) release(o *outMsg) {
	s.records.release(1)
	s.budget.release(o.budgeted)
}

// singleProducerKnows makes sure the single-record producer's metadata knows topic's
// partition before a record is sent through it: awaitTarget asked the batching
// producer's client, and sarama's manual partitioner refuses a partition its client
// does not know yet.
func (s *sender) singleProducerKnows(ctx context.Context, topic string, partition int32) error {
	if _, err := s.targets.partitions(s.singleClient, topic, partition); err == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.singleClient.RefreshMetadata(topic) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("while reading metadata of target topic %q: %w", topic, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resendAlone sends o again through the single-record producer after the target refused
// its batch as too large: the topic's limit fell below what the batching producer was
// sized for (altered while mirroring, or misread). From now on the topic's records go
// one at a time until the topic loop reads its limit again. It runs on the goroutine
// that reads the batching producer's errors, so refused records are sent again in
// the order they were refused.
//
// Order within the partition is kept for the refused records among themselves, but
// records queued behind them in the batching producer may reach the target first: the
// one ordering exception, which only a target topic whose limit is lowered while the
// mirror runs can cause. Nothing is lost or duplicated.
func (s *sender) resendAlone(o *outMsg) {
	if _, seen := s.limits.distrusted.LoadOrStore(o.msg.Topic, struct{}{}); !seen {
		s.log.Info("Target refused a record batch as too large; sending the topic's records one at a time until its max.message.bytes is read again",
			"targetTopic", o.msg.Topic, "partition", o.msg.Partition, "batchBytes", s.limits.batchCap)
	}
	s.resent.Add(1)
	o.via = routeSingle
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DeliveryTimeout.Duration)
	defer cancel()
	if err := s.singleProducerKnows(ctx, o.msg.Topic, o.msg.Partition); err != nil {
		s.fail(fmt.Errorf("while sending source record %s/%d offset %d again, alone: %w", o.part.topic, o.part.partition, o.sourceOffset, err))
		return
	}
	select {
	case s.single.Input() <- &o.msg:
	case <-s.failed:
	}
}
