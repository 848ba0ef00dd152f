// Command pause is the sandbox ("pause") container of the single-node cluster that
// make kube-up starts: it holds a pod's namespaces and does nothing else until it is told
// to stop. No registry is reachable here, so the node cannot pull registry.k8s.io/pause;
// hack/image packages this static binary instead (go run . pause).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of a pod with a shared process namespace it would also reap orphans; the
	// kernel does that for us when SIGCHLD is ignored.
	signal.Ignore(syscall.SIGCHLD)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
