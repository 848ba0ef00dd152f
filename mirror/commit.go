package mirror

import (
	"github.com/IBM/sarama"
)

// offsetCommitter is the commit step: it stores how far each source partition was
// mirrored. The consumer-group implementation below commits to the source group
// coordinator. An exactly-once mode would instead send the offsets to the target inside
// the producer's transaction (the target then being the only source of truth); it
// would implement this interface and leave the rest of the engine as it is.
type offsetCommitter interface {
	// Mark records that next is the next offset to read from topic/partition.
	Mark(topic string, partition int32, next int64)
	// Flush makes every marked offset durable.
	Flush()
}

// groupCommitter commits through a sarama consumer-group session. With auto-commit
// off, only Commit sends marked offsets, and its failures arrive on the group's Errors
// channel, which the stream reads.
type groupCommitter struct {
	session sarama.ConsumerGroupSession
}

// Mark marks the offset in the session.
func (g groupCommitter) Mark(topic string, partition int32, next int64) {
	g.session.MarkOffset(topic, partition, next, "")
}

// Flush commits the marked offsets synchronously.
func (g groupCommitter) Flush() {
	g.session.Commit()
}
