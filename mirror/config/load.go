package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Parse reads a config from YAML (or JSON), fills defaults and validates it. Keys match
// case-sensitively, as the API server matches a KafkaMirror's (sigs.k8s.io/json, which
// it uses): `ConsumerGroup:` is an unknown field, not consumerGroup. Unknown and
// duplicate fields are reported together with every validation problem, each with its
// field path, so one run shows everything to fix.
func Parse(data []byte) (*Config, error) {
	c, errs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	c.Default()
	errs = append(errs, c.ValidateFields(nil)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid mirror config: %w", errs.ToAggregate())
	}
	return c, nil
}

// Decode reads a config from YAML (or JSON) without defaulting or validating it. A
// document that is not YAML, or whose values have the wrong types, is an error; unknown
// and duplicate fields (keys match case-sensitively) come back as field errors beside
// the config decoded from the rest, so a caller can report them with the others.
func Decode(data []byte) (*Config, field.ErrorList, error) {
	var c Config
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, fmt.Errorf("while parsing the mirror config: %w", err)
	}
	strict, err := kjson.UnmarshalStrict(j, &c)
	if err != nil {
		return nil, nil, fmt.Errorf("while parsing the mirror config: %w", err)
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, strictFieldError(e))
	}
	dropEmpty(reflect.ValueOf(&c).Elem())
	return &c, errs, nil
}

// dropEmpty sets every empty, non-nil list or map held by an omitempty field to nil,
// throughout v: Marshal writes such a field as nothing, which reads back as nil, so the
// config survives the trip through the ConfigMap (Marshal, then Decode in the pod)
// unchanged. A field whose empty value means something (topics.configExclude) is not
// omitempty, and is kept.
func dropEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			dropEmpty(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			dropEmpty(v.Index(i))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue
			}
			_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			omitEmpty := strings.Contains(","+opts+",", ",omitempty,")
			if omitEmpty && (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && !fv.IsNil() && fv.Len() == 0 {
				fv.SetZero()
				continue
			}
			dropEmpty(fv)
		}
	}
}

// strictFieldError turns an unknown or duplicate field into a field error on its path.
func strictFieldError(e error) *field.Error {
	var fe kjson.FieldError
	if errors.As(e, &fe) && fe.FieldPath() != "" {
		detail := "unknown field (keys are case-sensitive)"
		if msg := e.Error(); len(msg) >= 9 && msg[:9] == "duplicate" {
			detail = "duplicate field"
		}
		return field.Forbidden(field.NewPath(fe.FieldPath()), detail)
	}
	return field.InternalError(nil, e)
}

// Load reads, defaults and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("while reading the mirror config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Marshal renders a config as YAML, the form the operator writes into the ConfigMap.
func Marshal(c *Config) ([]byte, error) {
	return yaml.Marshal(c)
}
