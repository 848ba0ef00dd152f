package demo

import (
	"errors"
	"fmt"
	"sort"

	"github.com/IBM/sarama"
)

// topicState is what both clusters and the consumer group say about one mirrored topic
// at one moment. Offsets are summed over partitions.
type topicState struct {
	Source           string
	Target           string
	SourcePartitions int
	TargetPartitions int // 0 while the target topic does not exist
	SourceEnd        int64
	TargetEnd        int64
	Committed        int64 // the group's committed offsets (0 for partitions without a commit)
	Lag              int64 // source end - committed, what the engine still has to mirror
}

// observer reads topic state from both clusters as an outsider would, with its own
// clients: the numbers stay true while the engine is dead.
type observer struct {
	source      sarama.Client
	target      sarama.Client
	sourceAdmin sarama.ClusterAdmin
	group       string
	topics      []topicPair
}

// topicPair names one mirrored topic on both sides.
type topicPair struct {
	Source string
	Target string
}

func (o *observer) snapshot() ([]topicState, error) {
	out := make([]topicState, 0, len(o.topics))
	committed := map[string]map[int32]int64{}
	offsets, err := o.sourceAdmin.ListConsumerGroupOffsets(o.group, nil)
	switch {
	case errors.Is(err, sarama.ErrGroupIDNotFound):
		// Nothing committed yet: the engine has not joined, or not committed, so far.
		offsets = &sarama.OffsetFetchResponse{}
	case err != nil:
		return nil, fmt.Errorf("while reading the committed offsets of group %q: %w", o.group, err)
	}
	for topic, blocks := range offsets.Blocks {
		committed[topic] = map[int32]int64{}
		for p, b := range blocks {
			if b != nil && b.Err == sarama.ErrNoError && b.Offset >= 0 {
				committed[topic][p] = b.Offset
			}
		}
	}
	for _, tp := range o.topics {
		st := topicState{Source: tp.Source, Target: tp.Target}
		ends, err := partitionEnds(o.source, tp.Source)
		if err != nil {
			return nil, fmt.Errorf("while reading source topic %q: %w", tp.Source, err)
		}
		st.SourcePartitions = len(ends)
		for p, end := range ends {
			st.SourceEnd += end
			c := committed[tp.Source][p]
			st.Committed += c
			if end > c {
				st.Lag += end - c
			}
		}
		tends, err := partitionEnds(o.target, tp.Target)
		if err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil, fmt.Errorf("while reading target topic %q: %w", tp.Target, err)
		}
		st.TargetPartitions = len(tends)
		for _, end := range tends {
			st.TargetEnd += end
		}
		out = append(out, st)
	}
	return out, nil
}

// partitionEnds returns the high watermark of every partition of topic, after a
// metadata refresh so that new partitions are seen at once.
func partitionEnds(c sarama.Client, topic string) (map[int32]int64, error) {
	if err := c.RefreshMetadata(topic); err != nil {
		return nil, err
	}
	parts, err := c.Partitions(topic)
	if err != nil {
		return nil, err
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	ends := make(map[int32]int64, len(parts))
	for _, p := range parts {
		end, err := c.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		ends[p] = end
	}
	return ends, nil
}

// caughtUp reports whether the group has committed everything the source holds: every
// record was either mirrored and acked or dropped by the filter.
func caughtUp(states []topicState) bool {
	for _, s := range states {
		if s.Lag != 0 || s.TargetPartitions != s.SourcePartitions {
			return false
		}
	}
	return true
}
