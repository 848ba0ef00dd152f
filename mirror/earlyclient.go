package mirror

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// streamClients are the streams' source clients, made while the first topic loop runs
// and the producers start rather than after them: a new client costs two round trips
// to the source (ApiVersions, metadata), its first request to each broker a connection,
// and the group join starts with FindCoordinator. Across a distance those were 0.4-0.5 s
// of the start, one step after the other (docs/performance.md, "Across regions").
// A stream takes its client once (take); one that never does, because Run ended
// first, is closed (abandon).
type streamClients struct {
	slots []*streamClientSlot
}

type streamClientSlot struct {
	done chan struct{}

	mu        sync.Mutex
	client    sarama.Client
	err       error
	taken     bool
	abandoned bool
}

// roundTripWaitLimit bounds how long a prepared stream client waits for the source's
// round trip to be measured before it keeps sarama's fetch size.
const roundTripWaitLimit = 2 * time.Second

// prepareStreamClients starts making each stream's source client: metadata,
// connections to every broker (openBrokers), and the consumer group's coordinator.
// Nothing is decided from what they learn; the group join asks again where needed.
// Beside them it measures the source's round trip on source (a connected client),
// which sizes the consumers' fetches (fetchPartitionBytes). wg counts the goroutines,
// so that Run's Closed waits for them.
func (e *Engine) prepareStreamClients(source sarama.Client, wg *sync.WaitGroup) *streamClients {
	sc := &streamClients{slots: make([]*streamClientSlot, e.cfg.Streams)}
	measured := make(chan struct{})
	wg.Go(func() {
		defer close(measured)
		rtt, ok := roundTrip(source)
		if !ok {
			return
		}
		e.sourceRTT.Store(int64(rtt))
		if e.fetchSizedByRoundTrip() {
			e.log.Info("Sized the consumers' fetches by the source's round trip", "roundTrip", rtt.Round(100*time.Microsecond).String(),
				"fetchPartitionBytes", kafka.FetchPartitionBytesFor(rtt))
		}
	})
	for id := range sc.slots {
		slot := &streamClientSlot{done: make(chan struct{})}
		sc.slots[id] = slot
		wg.Go(func() {
			defer close(slot.done)
			client, err := e.newStreamClient(id)
			if err == nil {
				openBrokers(client)
				_, _ = client.Coordinator(e.cfg.ConsumerGroup)
				// The consumer reads its fetch size from the client's configuration
				// when it is made from the client (runStream), after this. A source
				// that does not answer the measure within roundTripWaitLimit is read
				// with sarama's 1 MiB.
				select {
				case <-measured:
				case <-time.After(roundTripWaitLimit):
				}
				e.sizeFetches(client.Config())
			}
			slot.mu.Lock()
			defer slot.mu.Unlock()
			if slot.abandoned && client != nil {
				_ = client.Close()
				return
			}
			slot.client, slot.err = client, err
		})
	}
	return sc
}

// take returns stream id's client, made by prepareStreamClients or, when there is none
// (a stream that runs again, or no preparation), now. The caller closes it. When ctx
// ends first it returns ctx's error (and abandon closes the client once it is made).
func (sc *streamClients) take(ctx context.Context, e *Engine, id int) (sarama.Client, error) {
	if sc != nil && id < len(sc.slots) {
		slot := sc.slots[id]
		select {
		case <-slot.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		slot.mu.Lock()
		defer slot.mu.Unlock()
		if !slot.taken && !slot.abandoned && slot.err == nil && slot.client != nil {
			slot.taken = true
			return slot.client, nil
		}
	}
	return e.newStreamClient(id)
}

// abandon closes the clients no stream took, now or once they are made.
func (sc *streamClients) abandon() {
	if sc == nil {
		return
	}
	for _, slot := range sc.slots {
		slot.mu.Lock()
		slot.abandoned = true
		if !slot.taken && slot.client != nil {
			_ = slot.client.Close()
			slot.client = nil
		}
		slot.mu.Unlock()
	}
}

// newStreamClient makes stream id's source client, with the consumer group's
// configuration.
func (e *Engine) newStreamClient(id int) (sarama.Client, error) {
	cc, err := kafka.ConsumerConfig(e.cfg, e.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	cc.Consumer.Group.InstanceId = instanceID(e.cfg, id)
	e.sizeFetches(cc)
	if e.tune != nil {
		e.tune(cc)
	}
	return kafka.NewClientFromConfig(e.cfg.Source, cc, append([]kafka.Option{kafka.WithRole(kafka.RoleSource)}, e.kafkaOpts...)...)
}

// fetchSizedByRoundTrip reports whether the consumers' fetch size follows the source's
// round trip: when consumer.fetchPartitionBytes is not set.
func (e *Engine) fetchSizedByRoundTrip() bool {
	return e.cfg.Consumer == nil || e.cfg.Consumer.FetchPartitionBytes <= 0
}

// sizeFetches sets cc's fetch size per partition from the source's round trip
// (kafka.FetchPartitionBytesFor), unless consumer.fetchPartitionBytes sets it, or the
// round trip was not measured (then sarama's 1 MiB stays).
func (e *Engine) sizeFetches(cc *sarama.Config) {
	if rtt := time.Duration(e.sourceRTT.Load()); rtt > 0 && e.fetchSizedByRoundTrip() {
		cc.Consumer.Fetch.Default = kafka.FetchPartitionBytesFor(rtt)
	}
}

// roundTrip measures the source's round trip: the shorter of two ApiVersions requests
// to one of client's brokers (a connected one if there is one). A broker whose
// connection is still opening answers the first only once it is open (openBrokers
// started it at connect), so the second is the one that counts then. ok is false when
// the client knows no broker or the broker did not answer.
func roundTrip(client sarama.Client) (rtt time.Duration, ok bool) {
	brokers := client.Brokers()
	if len(brokers) == 0 {
		return 0, false
	}
	b := brokers[0]
	for _, c := range brokers {
		if connected, _ := c.Connected(); connected {
			b = c
			break
		}
	}
	for i := range 2 {
		start := time.Now()
		if _, err := b.ApiVersions(&sarama.ApiVersionsRequest{}); err != nil {
			return 0, false
		}
		if d := time.Since(start); i == 0 || d < rtt {
			rtt = d
		}
	}
	return rtt, true
}
