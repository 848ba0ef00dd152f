package main

import (
	"context"
	"errors"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// renderKafkaMirror is the stock binary's cli.ManifestRenderer. It admits the KafkaMirror
// document as the API server would (the CRD's schema and CEL rules, with kubectl's strict
// field validation: see admissionSchema.admit) and renders the engine config the operator
// would run for it. Admission problems come back joined, each a *field.Error, next to the
// rendered config when the document still decodes.
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
	schema, err := kafkaMirrorAdmission()
	if err != nil {
		return nil, err
	}
	jsonDoc, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
	}
	// The API server's JSON decoding: whole numbers become int64, as the schema expects.
	var obj map[string]any
	if err := utiljson.Unmarshal(jsonDoc, &obj); err != nil {
		return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
	}
	var problems []error
	for _, e := range schema.admit(context.Background(), obj) {
		problems = append(problems, e)
	}
	// The operator's own checks (regexes, CEL handlers, named handlers) run on the
	// rendered config too, so one run reports everything; a document that does not even
	// decode into a KafkaMirror has only the admission's verdict.
	var m v1alpha1.KafkaMirror
	if err := yaml.UnmarshalStrict(doc, &m); err != nil {
		if len(problems) > 0 {
			return nil, errors.Join(problems...)
		}
		return nil, fmt.Errorf("while parsing the KafkaMirror: %w", err)
	}
	for _, p := range controllers.PodProblems(&m) {
		problems = append(problems, errors.New(p))
	}
	return controllers.RenderConfig(&m), errors.Join(problems...)
}
