package main

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// renderKafkaMirror is the stock binary's cli.ManifestRenderer: it parses one KafkaMirror
// document strictly (a misspelt field is an error, as the API server's schema would
// make it) and renders the engine config the operator would run for it.
func renderKafkaMirror(doc []byte) (*config.Config, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
	}
	if want := v1alpha1.GroupVersion.String(); tm.APIVersion != want {
		return nil, fmt.Errorf("apiVersion: Unsupported value: %q: supported values: %q", tm.APIVersion, want)
	}
	var m v1alpha1.KafkaMirror
	if err := yaml.UnmarshalStrict(doc, &m); err != nil {
		return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
	}
	return controllers.RenderConfig(&m), nil
}
