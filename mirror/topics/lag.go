package topics

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/IBM/sarama"
)

// PartitionLag is a consumer group's progress on one source partition.
type PartitionLag struct {
	// Partition is the partition number.
	Partition int32
	// Committed is the group's committed offset, the next offset to read; -1 when the
	// group has committed nothing for this partition.
	Committed int64
	// HighWatermark is the offset the next record written to the partition will get.
	HighWatermark int64
	// Lag is the number of records not yet committed: HighWatermark - Committed, or
	// HighWatermark - log start offset when nothing is committed. Never negative.
	Lag int64
}

// Lag returns, per topic in topics and per partition (sorted), the group's committed
// offset, the high watermark and the lag. admin and client talk to the cluster the
// group consumes from (for the mirror, the source). An unknown topic is an error.
//
// A partition the group has not committed lags by everything still in its log, from
// its log start offset, as a mirror starting at initialOffset oldest reads it; with
// WithUncommittedFromEnd (initialOffset latest) it has no lag.
func Lag(ctx context.Context, admin sarama.ClusterAdmin, client sarama.Client, group string, topics []string, opts ...LagOption) (map[string][]PartitionLag, error) {
	var lo lagOptions
	for _, o := range opts {
		o(&lo)
	}
	out := make(map[string][]PartitionLag, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	// Fresh metadata, so partitions added since the client last looked are counted.
	if err := client.RefreshMetadata(topics...); err != nil {
		return nil, fmt.Errorf("while reading metadata of topics %q: %w", topics, err)
	}
	parts := make(map[string][]int32, len(topics))
	for _, t := range topics {
		ps, err := client.Partitions(t)
		if err != nil {
			return nil, fmt.Errorf("while reading partitions of topic %q: %w", t, err)
		}
		parts[t] = ps
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("while computing lag of group %q: %w", group, err)
	}

	committed, err := admin.ListConsumerGroupOffsets(group, parts)
	switch {
	case errors.Is(err, sarama.ErrGroupIDNotFound):
		// Some brokers answer so for a group that never committed; others answer -1
		// for every partition. Both mean nothing is committed.
		committed = &sarama.OffsetFetchResponse{}
	case err != nil:
		return nil, fmt.Errorf("while fetching committed offsets of group %q: %w", group, err)
	}
	hwm, err := listOffsets(client, parts, sarama.OffsetNewest)
	if err != nil {
		return nil, fmt.Errorf("while fetching high watermarks: %w", err)
	}
	// Log start offsets are needed only where nothing is committed, but one request
	// per broker for all of them is cheaper than working out which.
	start, err := listOffsets(client, parts, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("while fetching log start offsets: %w", err)
	}

	for t, ps := range parts {
		lags := make([]PartitionLag, 0, len(ps))
		for _, p := range ps {
			pl := PartitionLag{Partition: p, Committed: -1, HighWatermark: hwm[tp{t, p}]}
			if b := committed.GetBlock(t, p); b != nil {
				if b.Err != sarama.ErrNoError {
					return nil, fmt.Errorf("while fetching committed offset of group %q for %s/%d: %w", group, t, p, b.Err)
				}
				pl.Committed = b.Offset
			}
			from := pl.Committed
			switch {
			case from >= 0:
			case lo.uncommittedFromEnd:
				from = pl.HighWatermark
			default:
				from = start[tp{t, p}]
			}
			pl.Lag = max(pl.HighWatermark-from, 0)
			lags = append(lags, pl)
		}
		sort.Slice(lags, func(i, j int) bool { return lags[i].Partition < lags[j].Partition })
		out[t] = lags
	}
	return out, nil
}

// LagOption changes how Lag counts.
type LagOption func(*lagOptions)

type lagOptions struct {
	uncommittedFromEnd bool
}

// WithUncommittedFromEnd counts a partition the group has not committed from its end
// (lag 0), as a mirror with initialOffset latest starts there: the records already in
// it are never mirrored.
func WithUncommittedFromEnd() LagOption {
	return func(o *lagOptions) { o.uncommittedFromEnd = true }
}

type tp struct {
	topic     string
	partition int32
}

// listOffsets asks each partition leader once for the offsets at ts (OffsetNewest or
// OffsetOldest) of all its partitions.
func listOffsets(client sarama.Client, parts map[string][]int32, ts int64) (map[tp]int64, error) {
	requests := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]tp{}
	for t, ps := range parts {
		for _, p := range ps {
			b, err := client.Leader(t, p)
			if err != nil {
				return nil, fmt.Errorf("while finding the leader of %s/%d: %w", t, p, err)
			}
			req := requests[b]
			if req == nil {
				req = sarama.NewOffsetRequest(client.Config().Version)
				requests[b] = req
			}
			req.AddBlock(t, p, ts, 1)
			asked[b] = append(asked[b], tp{t, p})
		}
	}
	out := map[tp]int64{}
	for b, req := range requests {
		resp, err := b.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("while listing offsets on broker %d: %w", b.ID(), err)
		}
		for _, k := range asked[b] {
			blk := resp.GetBlock(k.topic, k.partition)
			switch {
			case blk == nil || len(blk.Offsets) != 1:
				return nil, fmt.Errorf("while listing offsets of %s/%d: %w", k.topic, k.partition, sarama.ErrIncompleteResponse)
			case blk.Err != sarama.ErrNoError:
				return nil, fmt.Errorf("while listing offsets of %s/%d: %w", k.topic, k.partition, blk.Err)
			}
			out[k] = blk.Offsets[0]
		}
	}
	return out, nil
}
