package mirror

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
)

// startHTTP serves /metrics, /healthz and /readyz on cfg.Metrics.Address ("0": off)
// until ctx ends. /healthz answers 200 while Run runs; /readyz answers 200 when Ready
// returns nil and 503 with the reason otherwise.
func (e *Engine) startHTTP(ctx context.Context, g *errgroup.Group) error {
	addr := e.cfg.Metrics.Address
	if addr == "0" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("while listening on metrics.address %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := e.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	e.httpAddrMu.Lock()
	e.httpAddress = ln.Addr().String()
	e.httpAddrMu.Unlock()
	e.log.Info("Serving metrics and health", "address", ln.Addr().String())
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error(err, "Metrics server stopped")
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	})
	return nil
}

// httpAddr returns the address the HTTP endpoint listens on ("" when off or not yet
// started), so that tests can use port 0.
func (e *Engine) httpAddr() string {
	e.httpAddrMu.Lock()
	defer e.httpAddrMu.Unlock()
	return e.httpAddress
}
