package handler

import (
	"math"

	"github.com/google/cel-go/checker"
)

// Runtime cost tracking costs more than a small filter itself (a tracker per evaluation,
// a stack of every intermediate value). So each expression's worst-case cost is also
// estimated statically, assuming every record part is within the bounds below; when
// that worst case is under the cost limit, records within the bounds are evaluated
// without a tracker (they cannot exceed the limit) and only larger records pay for it.

const (
	// estimateMaxBytes bounds each of key, value, and every header key and value, for
	// the static estimate: Kafka's default maximum record batch size, 1 MiB.
	estimateMaxBytes = 1 << 20
	// estimateMaxHeaders bounds the number of headers for the static estimate.
	estimateMaxHeaders = 256
	// estimateMaxTopic is Kafka's limit on topic name length.
	estimateMaxTopic = 249
)

// withinEstimate reports whether a record is within the bounds the static cost
// estimates assumed.
func withinEstimate(r *Record) bool {
	if len(r.Key) > estimateMaxBytes || len(r.Value) > estimateMaxBytes ||
		len(r.Headers) > estimateMaxHeaders || len(r.Topic) > estimateMaxTopic {
		return false
	}
	for i := range r.Headers {
		if len(r.Headers[i].Key) > estimateMaxBytes || len(r.Headers[i].Value) > estimateMaxBytes {
			return false
		}
	}
	return true
}

// recordSizes gives the static estimator the bounds above.
type recordSizes struct{}

func (recordSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if s := n.ComputedSize(); s != nil {
		return s
	}
	p := n.Path()
	if len(p) < 2 || p[0] != "record" {
		return nil
	}
	var max uint64
	switch {
	case len(p) == 2 && p[1] == "topic":
		max = estimateMaxTopic
	case len(p) == 2 && (p[1] == "key" || p[1] == "value"):
		max = estimateMaxBytes
	case len(p) == 2 && (p[1] == "headers" || p[1] == "headerList"):
		max = estimateMaxHeaders
	case len(p) == 3 && p[1] == "headers": // @keys, @values
		max = estimateMaxBytes
	case len(p) == 3 && p[1] == "headerList": // @items: {key, value}
		max = 2
	case len(p) == 4 && p[1] == "headerList":
		max = estimateMaxBytes
	default:
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: max}
}

func (s recordSizes) EstimateCallCost(_, overloadID string, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch overloadID {
	case "json_bytes", "json_string":
		// Matches byteSizeCost at run time: 1 + size/10.
		size := s.EstimateSize(args[0])
		if size == nil || size.Max == math.MaxUint64 {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: math.MaxUint64}}
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + size.Max/10}}
	case "to_json_dyn":
		// The size of the JSON it writes is not known before run time.
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: math.MaxUint64}}
	}
	return nil
}
