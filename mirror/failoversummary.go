package mirror

import (
	"encoding/json"
	"time"
)

// MaxFailoverSummaryBytes bounds a FailoverSummary's JSON: a Kubernetes termination
// message holds 4 KiB.
const MaxFailoverSummaryBytes = 4096

// maxSummaryErrorBytes bounds the error text kept in a FailoverSummary.
const maxSummaryErrorBytes = 1024

// FailoverSummary is a FailoverReport bounded in size, for the operator: the failover
// Job writes it as its termination message (`kafka-mirror failover
// --termination-log`), and the operator copies it into status.failover.report. It keeps
// the totals always and each partition and group only while they fit.
type FailoverSummary struct {
	Mode            FailoverMode `json:"mode"`
	Mirror          string       `json:"mirror"`
	Completed       bool         `json:"completed"`
	Error           string       `json:"error,omitempty"`
	SourceReachable bool         `json:"sourceReachable"`
	CutoverAt       *time.Time   `json:"cutoverAt,omitempty"`
	// Partitions is the number of source partitions in the report.
	Partitions int `json:"partitions"`
	// LeftBehind totals the known left-behind counts; LeftBehindUnknown counts the
	// partitions whose count is unknown or only an upper bound.
	LeftBehind        int64 `json:"leftBehind"`
	LeftBehindUnknown int   `json:"leftBehindUnknown,omitempty"`
	// Truncated reports that PartitionDetails and GroupDetails were left out to stay
	// within MaxFailoverSummaryBytes.
	Truncated        bool                       `json:"truncated,omitempty"`
	PartitionDetails []FailoverSummaryPartition `json:"partitionDetails,omitempty"`
	GroupDetails     []FailoverSummaryGroup     `json:"groupDetails,omitempty"`
}

// FailoverSummaryPartition is one FailoverPartition without its notes.
type FailoverSummaryPartition struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	SourceEnd  *int64 `json:"sourceEnd,omitempty"`
	Committed  int64  `json:"committed"`
	LeftBehind *int64 `json:"leftBehind,omitempty"`
	TargetEnd  int64  `json:"targetEnd"`
}

// FailoverSummaryGroup counts one group's translated, committed and exact partitions.
type FailoverSummaryGroup struct {
	Group      string `json:"group"`
	Partitions int    `json:"partitions"`
	Committed  int    `json:"committed"`
	Exact      int    `json:"exact"`
}

// Summarize returns r bounded to MaxFailoverSummaryBytes of JSON, and that JSON.
func (r *FailoverReport) Summarize() (FailoverSummary, []byte) {
	s := FailoverSummary{
		Mode: r.Mode, Mirror: r.Mirror, Completed: r.Completed, Error: r.Error,
		SourceReachable: r.SourceReachable, CutoverAt: r.CutoverAt, Partitions: len(r.Partitions),
	}
	if len(s.Error) > maxSummaryErrorBytes {
		s.Error = s.Error[:maxSummaryErrorBytes] + "..."
	}
	for _, p := range r.Partitions {
		if p.LeftBehind == nil || p.LeftBehindNote != "" {
			s.LeftBehindUnknown++
		}
		if p.LeftBehind != nil {
			s.LeftBehind += *p.LeftBehind
		}
		s.PartitionDetails = append(s.PartitionDetails, FailoverSummaryPartition{
			Topic: p.Topic, Partition: p.Partition, SourceEnd: p.SourceEnd,
			Committed: p.Committed, LeftBehind: p.LeftBehind, TargetEnd: p.TargetEnd,
		})
	}
	for _, g := range r.Groups {
		sg := FailoverSummaryGroup{Group: g.Group, Partitions: len(g.Partitions)}
		for _, p := range g.Partitions {
			if p.Committed {
				sg.Committed++
			}
			if p.Exact {
				sg.Exact++
			}
		}
		s.GroupDetails = append(s.GroupDetails, sg)
	}
	out, err := json.Marshal(s)
	if err == nil && len(out) <= MaxFailoverSummaryBytes {
		return s, out
	}
	// Totals only: they are small whatever the number of partitions.
	s.PartitionDetails, s.GroupDetails, s.Truncated = nil, nil, true
	out, _ = json.Marshal(s)
	return s, out
}
