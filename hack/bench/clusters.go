package main

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// startCluster starts a kfake cluster of n brokers on loopback ports chosen by the
// kernel. A positive bytesPerSecond throttles everything the cluster reads from its
// clients (produce requests above all) to that rate, shared by all its connections: a
// slow target, as a congested network or an overloaded broker would make it.
func startCluster(name string, brokers int, bytesPerSecond int64) (*kfake.Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(brokers), kfake.ClusterID(name)}
	if bytesPerSecond > 0 {
		lim := &byteLimiter{perByte: time.Second / time.Duration(bytesPerSecond)}
		if lim.perByte == 0 {
			return nil, fmt.Errorf("while starting the %s cluster: a throttle of %d B/s is too fast to throttle", name, bytesPerSecond)
		}
		opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			l, err := net.Listen(network, address)
			if err != nil {
				return nil, err
			}
			return &throttledListener{Listener: l, lim: lim}, nil
		}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("while starting the %s cluster: %w", name, err)
	}
	return c, nil
}

// byteLimiter spaces reads so that their bytes arrive no faster than one per perByte.
type byteLimiter struct {
	perByte time.Duration
	mu      sync.Mutex
	next    time.Time
}

func (l *byteLimiter) wait(n int) {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(n) * l.perByte)
	d := l.next.Sub(now)
	l.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

type throttledListener struct {
	net.Listener
	lim *byteLimiter
}

// Accept wraps every connection so that its reads are throttled.
func (l *throttledListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &throttledConn{Conn: c, lim: l.lim}, nil
}

type throttledConn struct {
	net.Conn
	lim *byteLimiter
}

// Read delays after reading, so the broker sees the bytes at the throttled rate.
func (c *throttledConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lim.wait(n)
	}
	return n, err
}
