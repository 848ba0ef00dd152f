package main

import (
	"context"
	_ "embed"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// kafkaMirrorCRD is the generated CRD (make manifests), the same bytes the chart and
// kustomize install, so `validate -f` judges a manifest by the schema the API server has.
//
//go:embed config/crd/bases/kafkamirror.io_kafkamirrors.yaml
var kafkaMirrorCRD []byte

// admissionSchema is what the API server builds from the CRD to admit a KafkaMirror of
// one version: the structural schema (defaults, pruning, CEL rules) and the OpenAPI
// validator (types, enums, bounds, patterns, required fields).
type admissionSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	admissionOnce sync.Once
	admission     *admissionSchema
	admissionErr  error
)

// kafkaMirrorAdmission builds the admission schema of the served version once.
func kafkaMirrorAdmission() (*admissionSchema, error) {
	admissionOnce.Do(func() { admission, admissionErr = newAdmissionSchema(kafkaMirrorCRD, v1alpha1.GroupVersion.Version) })
	return admission, admissionErr
}

func newAdmissionSchema(crdYAML []byte, version string) (*admissionSchema, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("while reading the embedded KafkaMirror CRD: %w", err)
	}
	var v1Validation *apiextensionsv1.CustomResourceValidation
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			v1Validation = v.Schema
		}
	}
	if v1Validation == nil || v1Validation.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the embedded KafkaMirror CRD has no schema for version %q", version)
	}
	var internal apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1Validation, &internal, nil); err != nil {
		return nil, fmt.Errorf("while converting the KafkaMirror schema: %w", err)
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("while building the structural KafkaMirror schema: %w", err)
	}
	openAPI, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("while building the KafkaMirror schema validator: %w", err)
	}
	return &admissionSchema{
		structural: structural,
		openAPI:    openAPI,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// admit judges a new KafkaMirror object (decoded from YAML or JSON) the way the API
// server does on create with kubectl's default strict field validation: unknown fields
// are errors, defaults are applied, then the OpenAPI schema, the metadata, list types and
// the CEL rules (x-kubernetes-validations) are checked. Transition rules (oldSelf) have no old
// object to compare with and are skipped, as on create. It returns every problem, with
// the API server's field paths and wording.
func (a *admissionSchema) admit(ctx context.Context, obj map[string]any) field.ErrorList {
	// Strict field validation rejects unknown fields before anything else is checked.
	unknown := structuralpruning.PruneWithOptions(obj, a.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(unknown) > 0 {
		var errs field.ErrorList
		for _, path := range unknown {
			errs = append(errs, field.Invalid(field.NewPath(path), field.OmitValueType{}, fmt.Sprintf("strict decoding error: unknown field %q", path)))
		}
		return errs
	}
	structuraldefaulting.Default(obj, a.structural)

	var errs field.ErrorList
	if name, ok := unstructuredString(obj, "metadata", "name"); ok && name != "" {
		for _, msg := range metavalidation.NameIsDNSSubdomain(name, false) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
		}
	}
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, a.openAPI)...)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, a.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, a.structural, obj)...)
	if blocked, err := blockingError(errs); blocked {
		return append(errs, err)
	}
	celErrs, _ := a.cel.Validate(ctx, nil, a.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// blockingError mirrors the API server: after an error of these types the CEL rules are
// not run (their inputs may be wrong), and one more error says so.
func blockingError(errs field.ErrorList) (bool, *field.Error) {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return false, nil
}

func unstructuredString(obj map[string]any, path ...string) (string, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		if cur, ok = m[p]; !ok {
			return "", false
		}
	}
	s, ok := cur.(string)
	return s, ok
}
