// Package offsets tracks the source offsets a mirror has read but the target has not
// yet acknowledged, so that the engine commits only what is safely on the target.
//
// There is one Tracker per source partition. The consumer goroutine Adds every record
// it reads (in offset order) and gets a Ticket back; the producer's ack goroutine Acks
// the ticket when the target acknowledged the record. The commit point is the smallest
// offset still un-acked or, when nothing is in flight, the last offset seen + 1. Gaps
// between offsets (transaction markers, compacted records) need no special handling
// because only offsets that were read are ever waited for.
//
// A record the handler dropped is Added with zero outputs and is done at once; a record
// the handler fanned out into N records is done when all N outputs are acked.
//
// The in-flight list is a ring buffer indexed by ticket, so Add, Ack and CommitPoint
// are amortised O(1) and allocate nothing once the ring has grown to the partition's
// in-flight high-water mark.
package offsets
