package mirror

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// offsetCommitter is the commit step: it stores how far each source partition was
// mirrored. The consumer-group implementation below commits to the source group
// coordinator. An exactly-once mode would instead send the offsets to the target inside
// the producer's transaction (the target then being the only source of truth); it
// would implement this interface and leave the rest of the engine as it is.
type offsetCommitter interface {
	// Commit stores each entry's next offset (the next offset to read) and sets the
	// entry's err when that partition's commit was not confirmed. An error returned
	// means the request as a whole failed and nothing was confirmed.
	Commit(offs []commitOffset) error
}

// commitOffset is one partition's entry in a commit.
type commitOffset struct {
	topic     string
	partition int32
	next      int64
	// topicID names the topic's incarnation the offset belongs to ("" when unknown).
	topicID string
	// err is the coordinator's answer for this partition, nil when it confirmed.
	err error
}

// groupCommitter commits through the source group coordinator with the session's
// generation and member id.
//
// It sends the OffsetCommit request itself instead of calling the session's
// MarkOffset and Commit: sarama's offset manager drops the retriable answers
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) silently, leaving the offset
// dirty with nothing on Errors(), and Commit returns nothing, so a commit would be
// done only as far as the engine could tell. Reading the per-partition error codes of
// the one request costs nothing more than the commit itself; checking after the fact
// with an OffsetFetch would cost a second round trip per commit and could not tell a
// retriable refusal from a final one. With auto-commit off the session's own offset
// manager then never sends anything (nothing is marked in it).
type groupCommitter struct {
	client  sarama.Client
	group   string
	session sarama.ConsumerGroupSession
}

// Commit sends one OffsetCommit request for offs to the group's coordinator.
func (g groupCommitter) Commit(offs []commitOffset) error {
	broker, err := g.client.Coordinator(g.group)
	if err != nil {
		return fmt.Errorf("while finding the coordinator of group %q: %w", g.group, err)
	}
	req := &sarama.OffsetCommitRequest{
		Version:                 offsetCommitVersion(g.client.Config().Version),
		ConsumerGroup:           g.group,
		ConsumerGroupGeneration: g.session.GenerationID(),
		ConsumerID:              g.session.MemberID(),
		RetentionTime:           -1, // the broker's default; only versions 2 to 4 send it
	}
	if id := g.client.Config().Consumer.Group.InstanceId; id != "" && req.Version >= 7 {
		req.GroupInstanceId = &id
	}
	// Version 1 carries a commit time: ReceiveTime lets the broker stamp it. The leader
	// epoch is sent as unknown (-1): the engine does not track it, and a stale epoch
	// would make a client that validates committed positions see a truncation.
	timestamp := int64(0)
	if req.Version == 1 {
		timestamp = sarama.ReceiveTime
	}
	for _, o := range offs {
		req.AddBlockWithLeaderEpoch(o.topic, o.partition, o.next, -1, timestamp, withTopicID(sourceCommitMetadata, o.topicID))
	}
	resp, err := broker.CommitOffset(req)
	if err != nil {
		// The connection failed or timed out: look the coordinator up again, as sarama's
		// offset manager does, so the retry goes wherever it moved.
		_ = g.client.RefreshCoordinator(g.group)
		return fmt.Errorf("while committing offsets of group %q: %w", g.group, err)
	}
	moved := false
	for i := range offs {
		o := &offs[i]
		kerr, ok := resp.Errors[o.topic][o.partition]
		switch {
		case !ok:
			o.err = sarama.ErrIncompleteResponse
		case kerr != sarama.ErrNoError:
			o.err = kerr
			moved = moved || errors.Is(kerr, sarama.ErrNotCoordinatorForConsumer) || errors.Is(kerr, sarama.ErrConsumerCoordinatorNotAvailable)
		default:
			o.err = nil
		}
	}
	if moved {
		_ = g.client.RefreshCoordinator(g.group)
	}
	return nil
}

// offsetCommitVersion is the OffsetCommit version sarama's offset manager would send
// for the configured Kafka version.
func offsetCommitVersion(v sarama.KafkaVersion) int16 {
	switch {
	case v.IsAtLeast(sarama.V2_4_0_0):
		return 8
	case v.IsAtLeast(sarama.V2_3_0_0):
		return 7
	case v.IsAtLeast(sarama.V2_1_0_0):
		return 6
	case v.IsAtLeast(sarama.V2_0_0_0):
		return 4
	case v.IsAtLeast(sarama.V0_11_0_0):
		return 3
	case v.IsAtLeast(sarama.V0_9_0_0):
		return 2
	default:
		return 1
	}
}

// retriableCommitError reports whether a commit refused with err may succeed when sent
// again in the same session: the coordinator moved, is loading or timed out, or the
// request never got an answer. Any other refusal (the generation is over, the member
// was fenced, not authorised, ...) is final for the session; the offset is then left
// to the partition's next owner, which re-reads from the last confirmed commit.
func retriableCommitError(err error) bool {
	var kerr sarama.KError
	if !errors.As(err, &kerr) {
		return true // no answer (a network error, no coordinator found) or an incomplete one
	}
	switch kerr {
	case sarama.ErrNotCoordinatorForConsumer, sarama.ErrConsumerCoordinatorNotAvailable,
		sarama.ErrOffsetsLoadInProgress, sarama.ErrRequestTimedOut:
		return true
	}
	return false
}
