package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// kafkaClientIdle is how long a cached Kafka client may stay unused before it is closed:
// a few default sync intervals, so that every KafkaMirror of a cluster keeps it warm.
const kafkaClientIdle = 5 * time.Minute

// kafkaClients caches one sarama client (and the admin over it) per cluster identity:
// role, bootstrap servers and TLS/SASL settings, and a hash of the credentials they
// name. KafkaMirrors on the same cluster with the same credentials share it, so a topic
// sync opens no new connection. A client is closed when it has been idle for
// kafkaClientIdle, when the last KafkaMirror that used it moved to other credentials,
// and after a failure (the next sync dials afresh). Its zero value is not usable: use
// newKafkaClients.
type kafkaClients struct {
	mu      sync.Mutex
	entries map[string]*kafkaClient
	// using is the identity each KafkaMirror last used per role.
	using map[usingKey]string
	idle  time.Duration
	now   func() time.Time
	dial  func(cl config.Cluster, role string, files secretFiles) (sarama.Client, sarama.ClusterAdmin, error)
}

// kafkaClient is one cached client with its admin.
type kafkaClient struct {
	identity string
	client   sarama.Client
	admin    sarama.ClusterAdmin
	// refs counts the syncs using it now; users the KafkaMirrors whose latest identity it is.
	refs     int
	users    map[types.NamespacedName]bool
	lastUsed time.Time
	// broken is set after a failure: nobody gets it any more, and it is closed when
	// the last sync using it lets go.
	broken bool
	// closed is set once its close has started.
	closed bool
}

type usingKey struct {
	mirror types.NamespacedName
	role   string
}

func newKafkaClients() *kafkaClients {
	return &kafkaClients{
		entries: map[string]*kafkaClient{},
		using:   map[usingKey]string{},
		idle:    kafkaClientIdle,
		now:     time.Now,
		dial:    connect,
	}
}

// clusterIdentity is what makes two clients interchangeable: the role (it names the
// cluster in errors), the cluster's settings and the contents of the files they name.
func clusterIdentity(cl config.Cluster, role string, files secretFiles) string {
	b, _ := json.Marshal(cl) // a struct of strings and bools: cannot fail
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", role, b)
	paths := make([]string, 0, len(files))
	for p := range files {
		if strings.Contains(string(b), `"`+p+`"`) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// acquire returns a client for cl, cached or newly dialled, on behalf of mirror. Call
// release when done with it.
func (k *kafkaClients) acquire(mirror types.NamespacedName, cl config.Cluster, role string, files secretFiles) (*kafkaClient, error) {
	id := clusterIdentity(cl, role, files)
	k.mu.Lock()
	toClose := k.sweepLocked()
	toClose = append(toClose, k.switchUserLocked(mirror, role, id)...)
	if e, ok := k.entries[id]; ok {
		e.refs++
		e.lastUsed = k.now()
		k.mu.Unlock()
		closeClients(toClose)
		return e, nil
	}
	k.mu.Unlock()
	closeClients(toClose)

	client, admin, err := k.dial(cl, role, files)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.entries[id]; ok {
		// Another sync dialled the same cluster meanwhile: keep one.
		e.refs++
		e.users[mirror] = true
		e.lastUsed = k.now()
		go func() { _ = admin.Close() }()
		return e, nil
	}
	e := &kafkaClient{identity: id, client: client, admin: admin, refs: 1, lastUsed: k.now(),
		users: map[types.NamespacedName]bool{mirror: true}}
	k.entries[id] = e
	return e, nil
}

// release gives back a client acquired for one sync; failed drops it from the cache, so
// a cluster that went away or a connection stuck on a broker that stopped answering is
// not reused.
func (k *kafkaClients) release(e *kafkaClient, failed bool) {
	k.mu.Lock()
	e.refs--
	e.lastUsed = k.now()
	if failed && !e.broken {
		e.broken = true
		if k.entries[e.identity] == e {
			delete(k.entries, e.identity)
		}
	}
	closeNow := e.broken && e.refs == 0
	k.mu.Unlock()
	if closeNow {
		closeClients([]*kafkaClient{e})
	}
}

// discard drops and closes a client at once, even while a sync still uses it: that
// sync is past its deadline, and closing the connections ends its stuck calls.
func (k *kafkaClients) discard(e *kafkaClient) {
	k.mu.Lock()
	e.broken = true
	if k.entries[e.identity] == e {
		delete(k.entries, e.identity)
	}
	k.mu.Unlock()
	closeClients([]*kafkaClient{e})
}

// forget says mirror uses no cluster any more (it was deleted); a client nobody else
// uses is closed.
func (k *kafkaClients) forget(mirror types.NamespacedName) {
	k.mu.Lock()
	var toClose []*kafkaClient
	for key := range k.using {
		if key.mirror == mirror {
			toClose = append(toClose, k.switchUserLocked(mirror, key.role, "")...)
			delete(k.using, key)
		}
	}
	k.mu.Unlock()
	closeClients(toClose)
}

// switchUserLocked records that mirror now uses identity id for role, and returns the
// client it used before when nobody else uses that one any more (its credentials
// changed): it is closed now rather than after kafkaClientIdle.
func (k *kafkaClients) switchUserLocked(mirror types.NamespacedName, role, id string) []*kafkaClient {
	key := usingKey{mirror: mirror, role: role}
	old, had := k.using[key]
	if id != "" {
		k.using[key] = id
	}
	if e, ok := k.entries[id]; ok {
		e.users[mirror] = true
	}
	if !had || old == id {
		return nil
	}
	e, ok := k.entries[old]
	if !ok {
		return nil
	}
	delete(e.users, mirror)
	if len(e.users) > 0 || e.refs > 0 {
		return nil
	}
	delete(k.entries, old)
	return []*kafkaClient{e}
}

// sweepLocked removes the clients idle for longer than k.idle and returns them.
func (k *kafkaClients) sweepLocked() []*kafkaClient {
	var out []*kafkaClient
	now := k.now()
	for id, e := range k.entries {
		if e.refs == 0 && now.Sub(e.lastUsed) > k.idle {
			delete(k.entries, id)
			out = append(out, e)
		}
	}
	return out
}

// size is the number of cached clients.
func (k *kafkaClients) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

// closeAll closes every cached client (the manager stopped).
func (k *kafkaClients) closeAll() {
	k.mu.Lock()
	out := make([]*kafkaClient, 0, len(k.entries))
	for id, e := range k.entries {
		delete(k.entries, id)
		out = append(out, e)
	}
	k.mu.Unlock()
	closeClients(out)
}

// closeMu guards kafkaClient.closed for closeClients, which runs outside kafkaClients.mu.
var closeMu sync.Mutex

// closeClients closes clients, each once, in the background: closing one whose broker
// stopped answering must not hold whoever dropped it.
func closeClients(es []*kafkaClient) {
	for _, e := range es {
		closeMu.Lock()
		already := e.closed
		e.closed = true
		closeMu.Unlock()
		if !already {
			go func() { _ = e.admin.Close() }()
		}
	}
}
