package handler

import (
	"sync"

	"github.com/go-logr/logr"
)

// funcLogger is a logr sink that hands every line (info and error) to fn, so tests can
// assert what was logged.
func funcLogger(fn func(msg string, kv []any)) logr.Logger {
	return logr.New(&funcSink{fn: fn})
}

type funcSink struct {
	mu sync.Mutex
	fn func(msg string, kv []any)
	kv []any
}

func (s *funcSink) Init(logr.RuntimeInfo)  {}
func (s *funcSink) Enabled(level int) bool { return true }
func (s *funcSink) Info(_ int, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn(msg, append(append([]any(nil), s.kv...), kv...))
}
func (s *funcSink) Error(err error, msg string, kv ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn(msg, append(append([]any{"error", err}, s.kv...), kv...))
}
func (s *funcSink) WithValues(kv ...any) logr.LogSink {
	return &funcSink{fn: s.fn, kv: append(append([]any(nil), s.kv...), kv...)}
}
func (s *funcSink) WithName(string) logr.LogSink { return s }
