package handler

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// scriptedListener behaves as its mode says, to exercise SafeListener.
type scriptedListener struct {
	mode     string // ok, error, panic, hang
	mu       sync.Mutex
	assigned [][]TopicPartition
	released chan struct{}
	once     sync.Once
}

func (l *scriptedListener) act(ctx context.Context, ps []TopicPartition) error {
	l.mu.Lock()
	l.assigned = append(l.assigned, ps)
	l.mu.Unlock()
	switch l.mode {
	case "error":
		return errors.New("listener broke")
	case "panic":
		panic("listener exploded")
	case "hang":
		<-ctx.Done() // a well-behaved hang: returns once abandoned
		l.once.Do(func() { close(l.released) })
		return ctx.Err()
	}
	return nil
}

func (l *scriptedListener) OnAssigned(ctx context.Context, ps []TopicPartition) error {
	return l.act(ctx, ps)
}
func (l *scriptedListener) OnRevoked(ctx context.Context, ps []TopicPartition) error {
	return l.act(ctx, ps)
}

var scripted = map[string]*scriptedListener{}

func init() {
	for _, mode := range []string{"ok", "error", "panic", "hang"} {
		l := &scriptedListener{mode: mode, released: make(chan struct{})}
		scripted[mode] = l
		RegisterListener("test-"+mode, func(map[string]string) (RebalanceListener, error) { return l, nil })
	}
}

func TestNewListener(t *testing.T) {
	tests := map[string]struct {
		spec *config.PluginSpec
		opts []ChainOption
		want string // error; empty for success
	}{
		"nil spec":        {spec: nil},
		"log":             {spec: &config.PluginSpec{Name: "log"}},
		"log verbosity":   {spec: &config.PluginSpec{Name: "log", Args: map[string]string{"verbosity": "2"}}},
		"log bad arg":     {spec: &config.PluginSpec{Name: "log", Args: map[string]string{"verbosity": "loud"}}, want: `rebalanceListener.args.verbosity: "loud" is not a non-negative integer`},
		"log unknown arg": {spec: &config.PluginSpec{Name: "log", Args: map[string]string{"level": "1"}}, want: "rebalanceListener.args.level: unknown argument (accepted: verbosity)"},
		"unknown":         {spec: &config.PluginSpec{Name: "slack"}, want: `rebalanceListener.name: unknown rebalance listener "slack" (registered: log, test-ok, test-error, test-panic, test-hang)`},
		"no name":         {spec: &config.PluginSpec{}, want: "rebalanceListener.name: the name of a registered rebalance listener is required"},
		"custom path":     {spec: &config.PluginSpec{Name: "nope"}, opts: []ChainOption{WithFieldPath("spec.rebalanceListener")}, want: `spec.rebalanceListener.name: unknown rebalance listener "nope" (registered: log, test-ok, test-error, test-panic, test-hang)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := NewListener(tc.spec, tc.opts...)
			if tc.want != "" {
				if err == nil || err.Error() != tc.want {
					t.Fatalf("error = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewListener: %v", err)
			}
			if (tc.spec == nil) != (l == nil) {
				t.Fatalf("listener = %v for spec %v", l, tc.spec)
			}
		})
	}
}

func TestLogListenerLogsAssignments(t *testing.T) {
	var got []string
	var parts []any
	log := funcLogger(func(msg string, kv []any) { got = append(got, msg); parts = kv })
	l, err := NewListener(&config.PluginSpec{Name: "log"}, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	ps := []TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 2}}
	if err := l.OnAssigned(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	if err := l.OnRevoked(context.Background(), ps[:1]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Assigned partitions", "Revoked partitions"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	if want := []any{"partitions", []string{"orders/0"}}; !reflect.DeepEqual(parts, want) {
		t.Fatalf("last line's values = %v, want %v", parts, want)
	}
}

// Whatever the user's listener does, the engine's call returns nil promptly; failures
// are logged, counted and reported to the hook.
func TestSafeListenerContainsFailures(t *testing.T) {
	tests := map[string]struct {
		wantErrors uint64
		wantMsg    string
	}{
		"ok":    {wantErrors: 0},
		"error": {wantErrors: 2, wantMsg: "listener broke"},
		"panic": {wantErrors: 2, wantMsg: `rebalance listener "test-panic" panicked: listener exploded`},
		"hang":  {wantErrors: 2, wantMsg: `rebalance listener "test-hang" did not return within 50ms: context deadline exceeded`},
	}
	for mode, tc := range tests {
		t.Run(mode, func(t *testing.T) {
			var logged []string
			var hooked []string
			log := funcLogger(func(msg string, kv []any) { logged = append(logged, msg) })
			l, err := NewListener(&config.PluginSpec{Name: "test-" + mode}, WithLogger(log),
				WithListenerTimeout(50*time.Millisecond),
				OnListenerError(func(event string, err error) { hooked = append(hooked, event+": "+err.Error()) }))
			if err != nil {
				t.Fatal(err)
			}
			ps := []TopicPartition{{Topic: "t", Partition: 1}}
			start := time.Now()
			if err := l.OnAssigned(context.Background(), ps); err != nil {
				t.Fatalf("OnAssigned returned %v", err)
			}
			if mode == "hang" {
				<-scripted["hang"].released // the abandoned call saw its context end
			}
			if err := l.OnRevoked(context.Background(), ps); err != nil {
				t.Fatalf("OnRevoked returned %v", err)
			}
			// A hanging listener that was waited for would block forever; the ceiling
			// only tells "abandoned after its timeout" from "waited for", with room for
			// a busy machine.
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("two calls took %v with a 50ms listener timeout", took)
			}
			if n := l.(*SafeListener).Errors(); n != tc.wantErrors {
				t.Fatalf("Errors() = %d, want %d", n, tc.wantErrors)
			}
			if tc.wantErrors == 0 {
				if len(logged) != 0 || len(hooked) != 0 {
					t.Fatalf("logged %q, hooked %q; want nothing", logged, hooked)
				}
				return
			}
			if want := []string{"assigned: " + tc.wantMsg, "revoked: " + tc.wantMsg}; !reflect.DeepEqual(hooked, want) {
				t.Fatalf("hook got %q, want %q", hooked, want)
			}
			if want := []string{"Rebalance listener failed", "Rebalance listener failed"}; !reflect.DeepEqual(logged, want) {
				t.Fatalf("logged %q, want %q", logged, want)
			}
		})
	}
}
