package mirror

import (
	"sync"

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

// prepareStreamClients starts making each stream's source client: metadata,
// connections to every broker (openBrokers), and the consumer group's coordinator.
// Nothing is decided from what they learn; the group join asks again where needed.
// wg counts the goroutines, so that Run's Closed waits for them.
func (e *Engine) prepareStreamClients(wg *sync.WaitGroup) *streamClients {
	sc := &streamClients{slots: make([]*streamClientSlot, e.cfg.Streams)}
	for id := range sc.slots {
		slot := &streamClientSlot{done: make(chan struct{})}
		sc.slots[id] = slot
		wg.Go(func() {
			defer close(slot.done)
			client, err := e.newStreamClient(id)
			if err == nil {
				openBrokers(client)
				_, _ = client.Coordinator(e.cfg.ConsumerGroup)
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
// (a stream that runs again, or no preparation), now. The caller closes it.
func (sc *streamClients) take(e *Engine, id int) (sarama.Client, error) {
	if sc != nil && id < len(sc.slots) {
		slot := sc.slots[id]
		<-slot.done
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
	if e.tune != nil {
		e.tune(cc)
	}
	return kafka.NewClientFromConfig(e.cfg.Source, cc, append([]kafka.Option{kafka.WithRole(kafka.RoleSource)}, e.kafkaOpts...)...)
}
