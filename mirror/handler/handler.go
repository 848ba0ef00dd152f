package handler

import (
	"context"
	"time"
)

// Header is one Kafka record header. Order and duplicates are kept as on the source.
type Header struct {
	Key   string
	Value []byte
}

// Record is what a handler sees and emits. The engine fills it from a source record;
// a nil Key or Value is a null key or value (a tombstone) and stays null.
//
// Topic starts as the source topic; the engine applies topics.rename to whatever topic
// the handler chain leaves. Partition starts as the source partition; with
// `partitioning: preserve` the record goes to that partition of the target topic.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Handler turns one record into zero or more records. Handle appends its outputs to out
// and returns it: appending nothing drops the record (it counts as done at once),
// appending several fans it out (the source offset is committed only after every output
// was acked). Handlers may modify and re-emit in. An error stops or skips the record
// according to the handler's onError policy.
type Handler interface {
	Handle(ctx context.Context, in *Record, out []*Record) ([]*Record, error)
}

// TopicPartition names one source partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// RebalanceListener is told about assignment changes of one stream. OnRevoked is called
// after the engine drained and committed the partitions; errors are logged and counted
// and never block the drain.
type RebalanceListener interface {
	OnAssigned(ctx context.Context, partitions []TopicPartition) error
	OnRevoked(ctx context.Context, partitions []TopicPartition) error
}
