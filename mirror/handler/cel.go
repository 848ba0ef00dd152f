package handler

import "github.com/kafka-mirror/kafka-mirror-operator/mirror/config"

// newCELHandler compiles a CEL step. Placeholder until the CEL handler lands.
func newCELHandler(_ *config.CELHandler, path string, _ *options) (Handler, error) {
	return nil, &FieldError{Field: path + ".cel", Detail: "CEL handlers are not built yet"}
}
