package mirror

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Loop prevention for active-active mirroring (config provenance). Every record the
// engine writes carries one provenance header whose value is the comma-separated list
// of the ids of the clusters the record was mirrored from, oldest first: a record
// produced on cluster A and mirrored to B carries "A"; mirrored on from B to C it
// carries "A,B". The number of ids is the record's hop count. A record is dropped,
// counted and committed like a filtered record, when its header already names the
// target cluster (it came from there: mirroring it would close a loop) or when one
// more hop would exceed maxHops.

// provenanceSeparator separates the cluster ids in the header's value.
const provenanceSeparator = ','

// dropReason says why a record is not mirrored; dropNone mirrors it.
type dropReason int

const (
	dropNone dropReason = iota
	// dropFromTarget: the record's provenance names the target cluster.
	dropFromTarget
	// dropMaxHops: one more hop would exceed provenance.maxHops.
	dropMaxHops
)

// provenance decides per record whether it is mirrored and with which header. It is
// immutable once resolve has set the cluster ids, before the streams start.
type provenance struct {
	header []byte
	// name is header as a string, for the handler chain's headers.
	name    string
	maxHops int
	strip   bool
	// sourceID and targetID are the clusters' ids (resolve).
	sourceID, targetID []byte
}

// newProvenance returns nil when provenance is off, so that the hot path pays one nil
// check.
func newProvenance(cfg *config.Config) *provenance {
	if !cfg.ProvenanceEnabled() {
		return nil
	}
	p := cfg.Provenance
	return &provenance{header: []byte(p.Header), name: p.Header, maxHops: p.MaxHops, strip: p.Strip}
}

// clusterIDMetadataVersion is the first Metadata request version whose answer holds the
// cluster id (Kafka 0.10.1).
const clusterIDMetadataVersion = 2

// clusterID asks a cluster for its id; it returns "" when the cluster does not report
// one. The request names no topic, so the answer is small.
func clusterID(client sarama.Client) (string, error) {
	b, err := client.Controller()
	if err != nil {
		b = client.LeastLoadedBroker()
		if b == nil {
			return "", fmt.Errorf("while finding a broker: %w", err)
		}
	}
	req := sarama.NewMetadataRequest(sarama.V0_10_1_0, nil)
	req.Version = clusterIDMetadataVersion
	req.Topics = []string{}
	resp, err := b.GetMetadata(req)
	if err != nil {
		return "", fmt.Errorf("while reading the cluster metadata: %w", err)
	}
	if resp.ClusterID == nil {
		return "", nil
	}
	return *resp.ClusterID, nil
}

// resolve sets the cluster ids: the id each cluster reports, else the configured name.
// It fails when neither gives an id, or when both clusters end up with the same id (then
// no record could be told apart by its provenance).
func (p *provenance) resolve(cfg *config.Provenance, source, target sarama.Client) error {
	sid, err := resolveClusterID(source, cfg.SourceName, "source", "provenance.sourceName")
	if err != nil {
		return err
	}
	tid, err := resolveClusterID(target, cfg.TargetName, "target", "provenance.targetName")
	if err != nil {
		return err
	}
	if sid == tid {
		return fmt.Errorf("while setting up provenance: the source and the target cluster both have the id %q, so a record's provenance cannot tell them apart (are they the same cluster?)", sid)
	}
	p.sourceID, p.targetID = []byte(sid), []byte(tid)
	return nil
}

func resolveClusterID(client sarama.Client, name, role, field string) (string, error) {
	id, err := clusterID(client)
	if id != "" {
		return id, nil
	}
	if name != "" {
		return name, nil
	}
	if err == nil {
		err = errors.New("the cluster reports no id")
	}
	return "", fmt.Errorf("while reading the %s cluster's id for provenance (set %s to name it): %w", role, field, err)
}

// check reads the record's provenance headers (hs) and says whether to drop it and, if
// not, the header value to write: the record's path with the source cluster's id
// appended. A record carrying several provenance headers is judged by all of them
// (any naming the target drops it) and its hop count is the longest path's.
func (p *provenance) check(hs []*sarama.RecordHeader) (stamp []byte, why dropReason) {
	var path []byte
	hops := 0
	for _, h := range hs {
		if h == nil || len(h.Value) == 0 || !bytes.Equal(h.Key, p.header) {
			continue
		}
		n := 0
		for id := range bytes.SplitSeq(h.Value, []byte{provenanceSeparator}) {
			if bytes.Equal(id, p.targetID) {
				return nil, dropFromTarget
			}
			n++
		}
		if n > hops {
			hops, path = n, h.Value
		}
	}
	if hops+1 > p.maxHops {
		return nil, dropMaxHops
	}
	if p.strip {
		return nil, dropNone
	}
	if hops == 0 {
		// The common case (a record produced on the source) allocates nothing.
		return p.sourceID, dropNone
	}
	stamp = make([]byte, 0, len(path)+1+len(p.sourceID))
	stamp = append(append(append(stamp, path...), provenanceSeparator), p.sourceID...)
	return stamp, dropNone
}

// stampHeader returns the header to write for stamp, which check returned.
func (p *provenance) stampHeader(stamp []byte) sarama.RecordHeader {
	return sarama.RecordHeader{Key: p.header, Value: stamp}
}

// isHeader reports whether a header key is the provenance header, which the engine
// replaces (or, with strip, removes) on every record it writes.
func (p *provenance) isHeader(key []byte) bool { return bytes.Equal(key, p.header) }
