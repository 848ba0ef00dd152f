package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// MaxInFlight is the most batches per partition Kafka's idempotence keeps track of (the
// broker remembers the last 5 batches of a producer and partition, so a batch sent
// again within them is answered as a duplicate rather than refused).
const MaxInFlight = 5

// batchOverhead is a record batch's header (sarama's recordBatchOverhead is 49; the
// engine counts 61 with the partition's framing in a request).
const batchOverhead = 61

// tick is how often lingering batches and delivery timeouts are checked.
const tick = 5 * time.Millisecond

// ErrTransactionsNotSupported is returned by the transactional methods: the engine's
// exactly-once path keeps sarama's transactional producers.
var ErrTransactionsNotSupported = errors.New("the pipelined producer does not support transactions")

// Options tunes a Producer beyond the client's sarama config.
type Options struct {
	// MaxInFlight is the most batches per partition in flight, 1..MaxInFlight.
	MaxInFlight int
	// DeliveryTimeout bounds how long a partition's records are retried, from its first
	// failure since its last ack, before they are handed back as failed; 0 means a
	// minute.
	DeliveryTimeout time.Duration
	// Backoff returns the wait before the given retry (0 first) of a partition.
	Backoff func(retries int) time.Duration
}

// Producer is a pipelined idempotent producer; see the package comment. One goroutine
// (run) owns every partition's state; broker answers reach it as events.
type Producer struct {
	client sarama.Client
	conf   *sarama.Config
	opts   Options

	producerID int64
	epoch      int16
	version    int16

	input     chan *sarama.ProducerMessage
	successes chan *sarama.ProducerMessage
	errs      chan *sarama.ProducerError
	events    chan func()
	closing   chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	// Owned by run.
	parts       map[string]map[int32]*partition
	partitioner map[string]sarama.Partitioner
	inFlight    int // requests
	pending     int // retries scheduled
	closed      bool
}

// partition is one target partition's queue: batches sealed and not yet acked, in
// sequence order, and the batch being filled.
type partition struct {
	topic   string
	id      int32
	batches []*batch // sealed, un-acked or acked but not yet reported (in order)
	filling *batch
	nextSeq int32
	// sealedLen is the record count of the last sealed batch, the next one's capacity.
	sealedLen int
	// inFlight counts this partition's batches in requests not yet answered.
	inFlight int
	// retrying is set by a failure a retry can cure: nothing is sent until inFlight
	// is 0 and the retry (metadata refresh after a backoff) ran.
	retrying  bool
	scheduled bool
	retries   int
	lastErr   error
	// failingSince is when the partition's first failure since its last ack came:
	// producer.deliveryTimeout bounds how long its records are retried from then.
	failingSince time.Time
	// renumberFrom is the sequence the batches after a refused one take when the
	// partition resumes (the broker wrote none of them), -1 when none.
	renumberFrom int32
	renumberAt   int // index in batches of the first batch to renumber
	failed       error
	// leader is the broker the partition's batches go to, looked up off run's goroutine
	// (lookUpLeader) and forgotten on every failure a retry cures; lookingUp is set
	// while the look-up runs.
	leader    *sarama.Broker
	lookingUp bool
}

type batchState int

const (
	queued batchState = iota
	sent
	acked
)

type batch struct {
	msgs []*sarama.ProducerMessage
	// recs holds the records by value (one allocation per batch growth rather than one
	// per record); records points into it, made once the batch is sealed (recs no longer
	// grows then), for sarama's RecordBatch.
	recs    []sarama.Record
	records []*sarama.Record
	// headers holds every record's header pointers; each record's Headers is a
	// full-capacity slice of it (a later growth leaves earlier slices on the old array).
	headers  []*sarama.RecordHeader
	maxDelta time.Duration // the largest TimestampDelta
	bytes    int
	first    time.Time // timestamp of the first record (the batch's base timestamp)
	created  time.Time
	seq      int32
	state    batchState
	offset   int64
}

// New makes a Producer over client, whose config gives the acks, timeouts,
// compression, batch cap (Producer.MaxMessageBytes), flush thresholds and version. It
// asks the cluster for a producer ID and epoch first.
func New(client sarama.Client, opts Options) (*Producer, error) {
	conf := client.Config()
	if opts.MaxInFlight < 1 || opts.MaxInFlight > MaxInFlight {
		return nil, fmt.Errorf("maxInFlight %d: must be 1 to %d", opts.MaxInFlight, MaxInFlight)
	}
	if !conf.Version.IsAtLeast(sarama.V0_11_0_0) {
		return nil, fmt.Errorf("the pipelined producer needs Kafka 0.11 or later (record batches v2), the client is set to %s", conf.Version)
	}
	if conf.Producer.RequiredAcks != sarama.WaitForAll {
		return nil, errors.New("the pipelined producer needs acks=all (RequiredAcks = WaitForAll)")
	}
	if conf.Producer.Idempotent {
		return nil, errors.New("the pipelined producer's client must not set Producer.Idempotent: it does idempotence itself")
	}
	if opts.DeliveryTimeout <= 0 {
		opts.DeliveryTimeout = time.Minute
	}
	if opts.Backoff == nil {
		opts.Backoff = func(int) time.Duration { return conf.Producer.Retry.Backoff }
	}
	id, err := initProducerID(client, opts)
	if err != nil {
		return nil, fmt.Errorf("while asking the target for a producer ID: %w", err)
	}
	buf := max(conf.ChannelBufferSize, 1)
	p := &Producer{
		client:      client,
		conf:        conf,
		opts:        opts,
		producerID:  id.ProducerID,
		epoch:       id.ProducerEpoch,
		version:     produceVersion(conf.Version),
		input:       make(chan *sarama.ProducerMessage, buf),
		successes:   make(chan *sarama.ProducerMessage, buf),
		errs:        make(chan *sarama.ProducerError, buf),
		events:      make(chan func(), 1024),
		closing:     make(chan struct{}),
		done:        make(chan struct{}),
		parts:       make(map[string]map[int32]*partition),
		partitioner: make(map[string]sarama.Partitioner),
	}
	go p.run()
	return p, nil
}

// initProducerID asks the cluster for a producer ID, retrying with the backoff for
// up to the delivery timeout while the answer says a retry can help: a fresh cluster
// answers COORDINATOR_LOAD_IN_PROGRESS while its transaction state loads (seen on
// Kafka 4.4; sarama's client.InitProducerID does not retry, its idempotent producer
// does).
func initProducerID(client sarama.Client, opts Options) (*sarama.InitProducerIDResponse, error) {
	deadline := time.Now().Add(opts.DeliveryTimeout)
	for retries := 0; ; retries++ {
		id, err := client.InitProducerID()
		if err == nil && id.Err != sarama.ErrNoError {
			err = id.Err
		}
		if err == nil {
			return id, nil
		}
		var kerr sarama.KError
		if errors.As(err, &kerr) && !initRetriable(kerr) {
			return nil, err
		}
		wait := opts.Backoff(retries)
		if time.Now().Add(wait).After(deadline) {
			return nil, err
		}
		time.Sleep(wait)
	}
}

// initRetriable reports whether an InitProducerId answer is worth another try.
func initRetriable(err sarama.KError) bool {
	switch err {
	case sarama.ErrOffsetsLoadInProgress, sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrNotCoordinatorForConsumer,
		sarama.ErrConcurrentTransactions, sarama.ErrRequestTimedOut, sarama.ErrNetworkException:
		return true
	}
	return retriable(err)
}

// ProducerID returns the producer ID and epoch the batches carry.
func (p *Producer) ProducerID() (int64, int16) { return p.producerID, p.epoch }

// produceVersion is the Produce request version sarama's producer uses for v.
func produceVersion(v sarama.KafkaVersion) int16 {
	switch {
	case v.IsAtLeast(sarama.V3_7_0_0):
		return 10
	case v.IsAtLeast(sarama.V2_8_0_0):
		return 9
	case v.IsAtLeast(sarama.V2_4_0_0):
		return 8
	case v.IsAtLeast(sarama.V2_1_0_0):
		return 7
	case v.IsAtLeast(sarama.V2_0_0_0):
		return 6
	case v.IsAtLeast(sarama.V1_0_0_0):
		return 5
	default:
		return 3
	}
}

// Input is where records to send go; see sarama.AsyncProducer.
func (p *Producer) Input() chan<- *sarama.ProducerMessage { return p.input }

// Successes returns acked records, with their Offset set, in order per partition.
func (p *Producer) Successes() <-chan *sarama.ProducerMessage { return p.successes }

// Errors returns records that were not acked and will not be retried.
func (p *Producer) Errors() <-chan *sarama.ProducerError { return p.errs }

// AsyncClose sends what was handed over and closes Successes and Errors once every
// record was answered. Nothing may be sent to Input after it.
func (p *Producer) AsyncClose() { p.closeOnce.Do(func() { close(p.closing) }) }

// Close is AsyncClose, then waits, reading Successes and Errors; it returns the errors.
func (p *Producer) Close() error {
	p.AsyncClose()
	var errs sarama.ProducerErrors
	var wg sync.WaitGroup
	wg.Go(func() {
		for range p.successes {
		}
	})
	for pe := range p.errs {
		errs = append(errs, pe)
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// IsTransactional reports false: see ErrTransactionsNotSupported.
func (p *Producer) IsTransactional() bool { return false }

// TxnStatus reports no transaction.
func (p *Producer) TxnStatus() sarama.ProducerTxnStatusFlag {
	return sarama.ProducerTxnFlagUninitialized
}

// BeginTxn returns ErrTransactionsNotSupported.
func (p *Producer) BeginTxn() error { return ErrTransactionsNotSupported }

// CommitTxn returns ErrTransactionsNotSupported.
func (p *Producer) CommitTxn() error { return ErrTransactionsNotSupported }

// AbortTxn returns ErrTransactionsNotSupported.
func (p *Producer) AbortTxn() error { return ErrTransactionsNotSupported }

// AddOffsetsToTxn returns ErrTransactionsNotSupported.
func (p *Producer) AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata, string) error {
	return ErrTransactionsNotSupported
}

// AddOffsetsToTxnWithGroupMetadata returns ErrTransactionsNotSupported.
func (p *Producer) AddOffsetsToTxnWithGroupMetadata(map[string][]*sarama.PartitionOffsetMetadata, *sarama.ConsumerGroupMetadata) error {
	return ErrTransactionsNotSupported
}

// AddMessageToTxn returns ErrTransactionsNotSupported.
func (p *Producer) AddMessageToTxn(*sarama.ConsumerMessage, string, *string) error {
	return ErrTransactionsNotSupported
}

// AddMessageToTxnWithGroupMetadata returns ErrTransactionsNotSupported.
func (p *Producer) AddMessageToTxnWithGroupMetadata(*sarama.ConsumerMessage, *sarama.ConsumerGroupMetadata, *string) error {
	return ErrTransactionsNotSupported
}

// run owns the partitions: it takes records, seals and sends batches, and handles the
// brokers' answers (events), until closed and every record was answered.
func (p *Producer) run() {
	defer close(p.done)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	input, closing := p.input, p.closing
	for {
		select {
		case m := <-input:
			p.add(m)
			// Take what is already queued before sending, so requests carry full batches.
			for more := true; more; {
				select {
				case m := <-input:
					p.add(m)
				default:
					more = false
				}
			}
		case ev := <-p.events:
			ev()
		case <-ticker.C:
			p.checkTimeouts()
		case <-closing:
			closing = nil
			for more := true; more; {
				select {
				case m := <-input:
					p.add(m)
				default:
					more = false
				}
			}
			input = nil
			p.closed = true
		}
		p.dispatch()
		if p.closed && p.inFlight == 0 && p.pending == 0 && p.idle() {
			close(p.successes)
			close(p.errs)
			return
		}
	}
}

// idle reports whether no partition holds a record.
func (p *Producer) idle() bool {
	for _, ps := range p.parts {
		for _, pt := range ps {
			if len(pt.batches) > 0 || pt.filling != nil {
				return false
			}
		}
	}
	return true
}

func (p *Producer) partitionOf(m *sarama.ProducerMessage) (*partition, error) {
	pr := p.partitioner[m.Topic]
	if pr == nil {
		pr = p.conf.Producer.Partitioner(m.Topic)
		p.partitioner[m.Topic] = pr
	}
	parts, err := p.client.Partitions(m.Topic)
	if err != nil {
		return nil, err
	}
	id, err := pr.Partition(m, int32(len(parts)))
	if err != nil {
		return nil, err
	}
	if id < 0 || int(id) >= len(parts) {
		return nil, sarama.ErrInvalidPartition
	}
	m.Partition = id
	ps := p.parts[m.Topic]
	if ps == nil {
		ps = make(map[int32]*partition)
		p.parts[m.Topic] = ps
	}
	pt := ps[id]
	if pt == nil {
		pt = &partition{topic: m.Topic, id: id, renumberFrom: -1}
		ps[id] = pt
	}
	return pt, nil
}

// add puts m in its partition's filling batch, sealing the batch first when m would
// overflow it.
func (p *Producer) add(m *sarama.ProducerMessage) {
	pt, err := p.partitionOf(m)
	if err != nil {
		p.fail(m, err)
		return
	}
	if pt.failed != nil {
		p.fail(m, pt.failed)
		return
	}
	size := m.ByteSize(2)
	pc := &p.conf.Producer
	if f := pt.filling; f != nil && (f.bytes+size >= pc.MaxMessageBytes || (pc.Flush.MaxMessages > 0 && len(f.msgs) >= pc.Flush.MaxMessages)) {
		p.seal(pt)
	}
	f := pt.filling
	var now time.Time
	ts := m.Timestamp
	if ts.IsZero() || f == nil {
		now = time.Now()
		if ts.IsZero() {
			ts = now
		}
	}
	ts = ts.Truncate(time.Millisecond)
	newBatch := f == nil
	if newBatch {
		f = &batch{first: ts, created: now, bytes: batchOverhead, offset: -1,
			msgs: make([]*sarama.ProducerMessage, 0, pt.sealedLen), recs: make([]sarama.Record, 0, pt.sealedLen)}
	}
	rec := sarama.Record{TimestampDelta: ts.Sub(f.first), OffsetDelta: int64(len(f.msgs))}
	if err := f.record(&rec, m); err != nil {
		p.fail(m, err)
		return
	}
	if newBatch {
		pt.filling = f
	}
	f.maxDelta = max(f.maxDelta, rec.TimestampDelta)
	f.msgs = append(f.msgs, m)
	f.recs = append(f.recs, rec)
	f.bytes += size
}

// record encodes m's key, value and headers into rec (its size is m.ByteSize(2), as
// the engine counts it: sarama's ByteSize for record batches).
func (f *batch) record(rec *sarama.Record, m *sarama.ProducerMessage) error {
	var err error
	if m.Key != nil {
		if rec.Key, err = m.Key.Encode(); err != nil {
			return err
		}
	}
	if m.Value != nil {
		if rec.Value, err = m.Value.Encode(); err != nil {
			return err
		}
	}
	if n := len(m.Headers); n > 0 {
		start := len(f.headers)
		for i := range m.Headers {
			f.headers = append(f.headers, &m.Headers[i])
		}
		rec.Headers = f.headers[start : start+n : start+n]
	}
	return nil
}

// seal closes the partition's filling batch and gives it the next sequences.
func (p *Producer) seal(pt *partition) {
	f := pt.filling
	if f == nil {
		return
	}
	pt.filling = nil
	pt.sealedLen = len(f.msgs)
	f.records = make([]*sarama.Record, len(f.recs))
	for i := range f.recs {
		f.records[i] = &f.recs[i]
	}
	f.seq = pt.nextSeq
	pt.nextSeq = addSeq(pt.nextSeq, len(f.msgs))
	pt.batches = append(pt.batches, f)
}

// addSeq adds n to a sequence; sequences wrap to 0 after MaxInt32, as Kafka's do.
func addSeq(seq int32, n int) int32 {
	return int32((int64(seq) + int64(n)) % (1 << 31))
}

// ready reports whether the partition's filling batch should be sealed now: only when
// it can be sent at once (a free slot, nothing queued before it, the partition not
// stopped), so that a busy partition's batch keeps filling up to the cap; then when it
// reached a flush threshold or lingered producer.flushFrequency, or at once without a
// linger (as Kafka's linger.ms=0). When closing, always.
func (p *Producer) ready(pt *partition, now time.Time) bool {
	f := pt.filling
	if f == nil {
		return false
	}
	if p.closed {
		return true
	}
	if pt.retrying || pt.failed != nil || pt.inFlight >= p.opts.MaxInFlight || p.hasQueued(pt) {
		return false
	}
	fl := p.conf.Producer.Flush
	switch {
	case fl.Bytes > 0 && f.bytes >= fl.Bytes, fl.Messages > 0 && len(f.msgs) >= fl.Messages:
		return true
	case fl.Frequency > 0:
		return now.Sub(f.created) >= fl.Frequency
	}
	return true
}

// hasQueued reports whether a sealed batch waits to be sent.
func (p *Producer) hasQueued(pt *partition) bool {
	for _, b := range pt.batches {
		if b.state == queued {
			return true
		}
	}
	return false
}

// nextToSend returns the partition's first queued batch if it may be sent now.
func (p *Producer) nextToSend(pt *partition) *batch {
	if pt.retrying || pt.failed != nil || pt.inFlight >= p.opts.MaxInFlight {
		return nil
	}
	for _, b := range pt.batches {
		if b.state == queued {
			return b
		}
	}
	return nil
}

// request is one Produce request in flight and the batches it carries.
type request struct {
	broker  *sarama.Broker
	parts   []*partition
	batches []*batch
}

// dispatch seals ready batches and sends every partition's next batch, one request
// per leader carrying a batch of each of its ready partitions, as long as some
// partition has a batch and a free slot.
func (p *Producer) dispatch() {
	now := time.Now()
	for {
		reqs := make(map[*sarama.Broker]*request)
		for _, ps := range p.parts {
			for _, pt := range ps {
				if p.ready(pt, now) {
					p.seal(pt)
				}
				b := p.nextToSend(pt)
				if b == nil {
					continue
				}
				if pt.leader == nil {
					p.lookUpLeader(pt)
					continue
				}
				r := reqs[pt.leader]
				if r == nil {
					r = &request{broker: pt.leader}
					reqs[pt.leader] = r
				}
				r.parts = append(r.parts, pt)
				r.batches = append(r.batches, b)
				b.state = sent
				pt.inFlight++
			}
		}
		if len(reqs) == 0 {
			return
		}
		for _, r := range reqs {
			p.send(r)
		}
	}
}

// lookUpLeader finds the partition's leader on a goroutine of its own: while a
// partition has none, sarama's look-up refreshes metadata until the target names one
// (for up to the delivery timeout, kafka.keepLookingForLeaders), and run must go on
// sending the other partitions' batches and handling their answers meanwhile. The
// partition sends nothing until the answer comes back as an event; a failed look-up is
// a retry like a failed send.
func (p *Producer) lookUpLeader(pt *partition) {
	if pt.lookingUp {
		return
	}
	pt.lookingUp = true
	p.pending++
	started := time.Now()
	go func() {
		leader, err := p.client.Leader(pt.topic, pt.id)
		p.events <- func() {
			p.pending--
			pt.lookingUp = false
			if pt.failed != nil {
				return
			}
			if err != nil {
				if pt.failingSince.IsZero() {
					pt.failingSince = started // the look-up itself retried since then
				}
				p.retry(pt, err)
				p.settle(pt) // schedules the retry: nothing of it is in flight
				return
			}
			pt.leader = leader
		}
	}()
}

// send hands r to its broker; the answer comes back as an event.
func (p *Producer) send(r *request) {
	req := &sarama.ProduceRequest{
		RequiredAcks: p.conf.Producer.RequiredAcks,
		Timeout:      int32(p.conf.Producer.Timeout / time.Millisecond),
		Version:      p.version,
	}
	for i, b := range r.batches {
		req.AddBatch(r.parts[i].topic, r.parts[i].id, p.recordBatch(b))
	}
	p.inFlight++
	err := r.broker.AsyncProduce(req, func(resp *sarama.ProduceResponse, err error) {
		// This runs on the broker's reader: hand the answer to run.
		p.events <- func() { p.answered(r, resp, err) }
	})
	if err != nil {
		p.answered(r, nil, err)
	}
}

// recordBatch builds the wire batch of b with the producer's ID, epoch and b's sequence.
func (p *Producer) recordBatch(b *batch) *sarama.RecordBatch {
	return &sarama.RecordBatch{
		Version:          2,
		Codec:            p.conf.Producer.Compression,
		CompressionLevel: p.conf.Producer.CompressionLevel,
		FirstTimestamp:   b.first,
		MaxTimestamp:     b.first.Add(b.maxDelta),
		LastOffsetDelta:  int32(len(b.records) - 1),
		ProducerID:       p.producerID,
		ProducerEpoch:    p.epoch,
		FirstSequence:    b.seq,
		Records:          b.records,
	}
}

// answered handles a Produce answer (or the request's failure) batch by batch.
func (p *Producer) answered(r *request, resp *sarama.ProduceResponse, err error) {
	p.inFlight--
	for i, b := range r.batches {
		pt := r.parts[i]
		pt.inFlight--
		b.state = queued
		if pt.failed != nil {
			continue
		}
		if err != nil {
			p.retry(pt, err)
			continue
		}
		block := resp.GetBlock(pt.topic, pt.id)
		if block == nil {
			p.retry(pt, sarama.ErrIncompleteResponse)
			continue
		}
		p.answeredBatch(pt, b, block)
	}
	for _, pt := range r.parts {
		p.settle(pt)
	}
}

// answeredBatch handles one partition's answer for b.
func (p *Producer) answeredBatch(pt *partition, b *batch, block *sarama.ProduceResponseBlock) {
	switch kerr := block.Err; {
	case kerr == sarama.ErrNoError:
		b.state, b.offset = acked, block.Offset
	case kerr == sarama.ErrDuplicateSequenceNumber:
		// Written before (an answer lost on the way): the broker does not say where.
		b.state = acked
	case kerr == sarama.ErrMessageSizeTooLarge:
		// The engine sends such records again one by one (and stops if one alone is
		// refused), as with sarama's producer; the broker wrote nothing from b on, so
		// the batches after it take its sequences and the partition goes on.
		p.refuseTooLarge(pt, b)
	case kerr == sarama.ErrOutOfOrderSequenceNumber || kerr == sarama.ErrUnknownProducerID || kerr == sarama.ErrInvalidProducerEpoch:
		if p.firstUnacked(pt) == b && !pt.retrying {
			p.failPartition(pt, fmt.Errorf("the target refused the partition's next record batch (sequence %d): %w", b.seq, kerr))
			return
		}
		// A batch behind one not yet written: sent again after it.
		p.retry(pt, kerr)
	case retriable(kerr):
		p.retry(pt, kerr)
	default:
		p.failPartition(pt, kerr)
	}
}

// retriable reports whether a retry can cure a Produce error.
func retriable(err sarama.KError) bool {
	switch err {
	case sarama.ErrNotLeaderForPartition, sarama.ErrLeaderNotAvailable, sarama.ErrRequestTimedOut,
		sarama.ErrNotEnoughReplicas, sarama.ErrNotEnoughReplicasAfterAppend, sarama.ErrNetworkException,
		sarama.ErrKafkaStorageError, sarama.ErrUnknownTopicOrPartition, sarama.ErrFencedLeaderEpoch,
		sarama.ErrUnknownLeaderEpoch, sarama.ErrOffsetNotAvailable, sarama.ErrInvalidMessage,
		sarama.ErrThrottlingQuotaExceeded, sarama.ErrBrokerNotAvailable, sarama.ErrReplicaNotAvailable:
		return true
	}
	return false
}

// firstUnacked returns the partition's first batch not acked.
func (p *Producer) firstUnacked(pt *partition) *batch {
	for _, b := range pt.batches {
		if b.state != acked {
			return b
		}
	}
	return nil
}

// refuseTooLarge hands b's records back as too large and takes b out of the sequence.
func (p *Producer) refuseTooLarge(pt *partition, b *batch) {
	for i, x := range pt.batches {
		if x != b {
			continue
		}
		pt.batches = append(pt.batches[:i], pt.batches[i+1:]...)
		if pt.renumberFrom < 0 || i < pt.renumberAt {
			pt.renumberFrom, pt.renumberAt = b.seq, i
		}
		break
	}
	for _, m := range b.msgs {
		p.fail(m, sarama.ErrMessageSizeTooLarge)
	}
	// Quiesce, then renumber and resend (see resume).
	pt.retrying = true
	pt.lastErr = sarama.ErrMessageSizeTooLarge
}

// retry stops the partition's sends until its requests in flight answered and a
// metadata refresh after a backoff ran (settle schedules it).
func (p *Producer) retry(pt *partition, err error) {
	pt.retrying = true
	pt.lastErr = err
	if pt.failingSince.IsZero() {
		pt.failingSince = time.Now()
	}
	// The leader may have moved or its connection closed: look it up again (sarama's
	// look-up reopens a closed connection) once the partition resumes.
	pt.leader = nil
}

// settle reports the partition's acked batches in order and, once a stopped partition
// has nothing in flight, schedules its retry.
func (p *Producer) settle(pt *partition) {
	for len(pt.batches) > 0 && pt.batches[0].state == acked {
		b := pt.batches[0]
		pt.batches[0] = nil
		pt.batches = pt.batches[1:]
		if pt.renumberFrom >= 0 {
			pt.renumberAt--
		}
		for i, m := range b.msgs {
			if b.offset >= 0 {
				m.Offset = b.offset + int64(i)
			} else {
				m.Offset = -1
			}
			p.successes <- m
		}
		pt.retries = 0
		pt.failingSince = time.Time{}
	}
	if pt.failed != nil {
		if pt.inFlight == 0 {
			p.failPartition(pt, pt.failed)
		}
		return
	}
	if !pt.retrying || pt.inFlight > 0 || pt.scheduled {
		return
	}
	if p.timedOut(pt, time.Now()) {
		p.failPartition(pt, fmt.Errorf("no ack within the delivery timeout of %v, last error: %w", p.opts.DeliveryTimeout, pt.lastErr))
		return
	}
	pt.scheduled = true
	p.pending++
	wait := p.opts.Backoff(pt.retries)
	go func() {
		time.Sleep(wait)
		_ = p.client.RefreshMetadata(pt.topic)
		p.events <- func() {
			p.pending--
			pt.scheduled = false
			pt.retries++
			p.resume(pt)
		}
	}()
}

// resume lets a stopped partition send again: every un-acked batch goes out again in
// order, with the sequences it had (or, after a refused batch, the ones it takes).
func (p *Producer) resume(pt *partition) {
	if pt.failed != nil {
		return
	}
	if pt.renumberFrom >= 0 {
		seq := pt.renumberFrom
		for _, b := range pt.batches[max(pt.renumberAt, 0):] {
			b.seq = seq
			seq = addSeq(seq, len(b.msgs))
		}
		pt.nextSeq = seq
		pt.renumberFrom, pt.renumberAt = -1, 0
	}
	pt.retrying = false
}

// checkTimeouts fails partitions whose oldest record waited longer than the delivery
// timeout while nothing of theirs is in flight (a request in flight is bounded by the
// connection's read timeout and comes back).
func (p *Producer) checkTimeouts() {
	now := time.Now()
	for _, ps := range p.parts {
		for _, pt := range ps {
			if pt.failed != nil || pt.inFlight > 0 || !pt.retrying {
				continue
			}
			if p.timedOut(pt, now) {
				p.failPartition(pt, fmt.Errorf("no ack within the delivery timeout of %v, last error: %w", p.opts.DeliveryTimeout, pt.lastErr))
			}
		}
	}
}

// timedOut reports whether the stopped partition has records and has been retrying
// them for longer than the delivery timeout: counted from its first failure since the
// last ack, as sarama's producer retries for it (kafka.keepLookingForLeaders), so a
// record sent just before an outage is retried for the whole timeout too.
func (p *Producer) timedOut(pt *partition, now time.Time) bool {
	return !pt.failingSince.IsZero() && p.firstUnacked(pt) != nil && now.Sub(pt.failingSince) > p.opts.DeliveryTimeout
}

// failPartition hands every record of the partition not in flight back with err, and
// the ones in flight once answered (settle), and every later one: the engine stops,
// and its restart sends them again (duplicates are possible, losses are not).
func (p *Producer) failPartition(pt *partition, err error) {
	if pt.failed == nil {
		pt.failed = err
	}
	keep := pt.batches[:0]
	for _, b := range pt.batches {
		if b.state == sent {
			keep = append(keep, b)
			continue
		}
		for _, m := range b.msgs {
			p.fail(m, pt.failed)
		}
	}
	clear(pt.batches[len(keep):])
	pt.batches = keep
	if f := pt.filling; f != nil {
		pt.filling = nil
		for _, m := range f.msgs {
			p.fail(m, pt.failed)
		}
	}
}

// fail hands m back on Errors.
func (p *Producer) fail(m *sarama.ProducerMessage, err error) {
	p.errs <- &sarama.ProducerError{Msg: m, Err: err}
}
