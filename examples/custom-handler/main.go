// Command kafka-mirror here is an example of a team's own mirror image: the stock
// engine CLI (run, validate, version) with one more named handler, redact-email.
// docs/custom-handlers.md explains how to build it into an image and run it from a
// KafkaMirror.
package main

import (
	"os"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/cli"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

func main() {
	handler.Register("redact-email", newEmailRedactor)
	os.Exit(cli.Main())
}
