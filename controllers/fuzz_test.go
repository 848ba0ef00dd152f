package controllers

import (
	"reflect"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// FuzzValidate: no spec the API server could admit makes the validate step panic (a
// panic would crash-loop the manager for every KafkaMirror), and every spec it accepts
// renders a mirror.yaml that the engine loads back unchanged.
//
//	go test -fuzz=FuzzValidate -fuzztime=30s ./controllers/
func FuzzValidate(f *testing.F) {
	f.Add(`orders\..*`, `orders\.tmp\..*`, "", "", "!('skip' in record.headers)", "", "")
	f.Add("orders(", "", "dc1.", "", "record.value +", "record.key", "no-such-handler")
	f.Add(".*", "a)|(b", "", "x.{topic}.y", "", "string(record.value) + 'x'", "")
	f.Add("", "", "bad prefix", "{topic}", "1 / 0 == 1", "", "identity")
	f.Fuzz(func(t *testing.T, include, exclude, prefix, template, filter, transformValue, handlerName string) {
		m := newMirror(func(m *v1alpha1.KafkaMirror) {
			m.Spec.Topics.Include = []string{include}
			if exclude != "" {
				m.Spec.Topics.Exclude = []string{exclude}
			}
			if prefix != "" || template != "" {
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Prefix: prefix, Template: template}
			}
			if filter != "" || transformValue != "" {
				h := v1alpha1.HandlerSpec{CEL: &v1alpha1.CELHandler{Filter: filter}}
				if transformValue != "" {
					h.CEL.Transform = &v1alpha1.CELTransform{Value: transformValue}
				}
				m.Spec.Handlers = append(m.Spec.Handlers, h)
			}
			if handlerName != "" {
				m.Spec.Handlers = append(m.Spec.Handlers, v1alpha1.HandlerSpec{Name: handlerName})
			}
		})
		cfg, err := validate(m)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty validation error")
			}
			return
		}
		data, err := config.Marshal(cfg)
		if err != nil {
			t.Fatalf("a valid spec does not render: %v", err)
		}
		loaded, err := config.Parse(data)
		if err != nil {
			t.Fatalf("the engine rejects what the operator accepted: %v\n%s", err, data)
		}
		if !reflect.DeepEqual(loaded, cfg) {
			t.Fatalf("mirror.yaml does not round-trip:\n%+v\n%+v", loaded, cfg)
		}
	})
}
