package mirror

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// notAuthorizedError is a request that a cluster refused for want of an ACL, which a
// person must grant: it names the role's principal (when the config tells it), the
// operation and the resources in the words of Kafka's ACLs, why the engine asked, and
// what to grant. Several resources refused for the same ACL (one transactional id per
// claimed partition) make one error.
type notAuthorizedError struct {
	role, principal, operation, resourceType string
	// resources are the refused resources, in the order they were refused.
	resources []string
	// why says what needs the ACL ("delivery exactlyOnce"); grant what to grant.
	why, grant string
	err        error
}

func (e *notAuthorizedError) Error() string {
	msg := kafka.NotAuthorized(e.role, e.principal, e.operation, e.resourceType, e.resources[0])
	if n := len(e.resources) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("%s (%s): %s: %v", msg, e.why, e.grant, e.err)
}

func (e *notAuthorizedError) Unwrap() error { return e.err }

// acl names the missing ACL apart from the resources refused.
func (e *notAuthorizedError) acl() string {
	return e.role + "\x00" + e.principal + "\x00" + e.operation + "\x00" + e.resourceType + "\x00" + e.grant
}

// mergeRefusals returns the one notAuthorizedError that errs are when each of them is
// a refusal of the same ACL (their resources together), nil otherwise.
func mergeRefusals(errs []error) *notAuthorizedError {
	var merged *notAuthorizedError
	for _, err := range errs {
		var na *notAuthorizedError
		if !errors.As(err, &na) || (merged != nil && merged.acl() != na.acl()) {
			return nil
		}
		if merged == nil {
			c := *na
			c.resources = append([]string(nil), na.resources...)
			merged = &c
			continue
		}
		merged.resources = append(merged.resources, na.resources...)
	}
	return merged
}

// refusals keeps what the streams' sessions were last refused for want of an ACL, which
// Ready answers with until a session of the stream starts, and logs a refusal once per
// backoff for the whole engine: every stream retries on its own backoff, and each
// logging the same missing ACL would repeat it streams times.
type refusals struct {
	log logr.Logger

	mu       sync.Mutex
	byStream map[int]*notAuthorizedError
	// lastACL, lastAt and lastWait are the last line logged: its ACL, when, and the
	// backoff it announced. The next line comes when the ACL differs or that backoff
	// passed.
	lastACL  string
	lastAt   time.Time
	lastWait time.Duration
}

func newRefusals(log logr.Logger) *refusals {
	return &refusals{log: log, byStream: map[int]*notAuthorizedError{}}
}

// refused records that stream's session was refused with err, to be retried after wait.
func (r *refusals) refused(stream int, err *notAuthorizedError, wait time.Duration) {
	r.mu.Lock()
	r.byStream[stream] = err
	now := time.Now()
	logIt := err.acl() != r.lastACL || !now.Before(r.lastAt.Add(r.lastWait))
	if logIt {
		r.lastACL, r.lastAt, r.lastWait = err.acl(), now, wait
	}
	r.mu.Unlock()
	if logIt {
		r.log.Error(err, "Was not authorized by the cluster's ACLs; retrying until the ACL is granted", "cluster", err.role,
			"principal", err.principal, "operation", err.operation, "resourceType", err.resourceType, "resources", err.resources,
			"backoff", wait)
	}
}

// started records that a session of stream started: its refusal, if any, is over.
func (r *refusals) started(stream int) {
	r.mu.Lock()
	delete(r.byStream, stream)
	if len(r.byStream) == 0 {
		r.lastACL = ""
	}
	r.mu.Unlock()
}

// current returns the refusal of the lowest-numbered stream that has one, nil for none.
func (r *refusals) current() *notAuthorizedError {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out *notAuthorizedError
	lowest := -1
	for id, err := range r.byStream {
		if lowest < 0 || id < lowest {
			out, lowest = err, id
		}
	}
	return out
}
