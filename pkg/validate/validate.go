// Package validate checks a RoutingService manifest offline against the CRD the API server
// enforces (config/crd/bases, embedded): the CRD's defaults, its OpenAPI schema (types, bounds,
// enums, patterns) and its CEL rules, with the API server's own code
// (k8s.io/apiextensions-apiserver) and cost budgets, so the kubectl plugin's `plan` rejects a
// manifest with the same field paths and messages `kubectl apply` would get (issue 12).
//
// Not checked offline: metadata (name, namespace) and what only the cluster can tell (a
// migration Job's name held by another object, the schema the database is at).
package validate

import (
	"context"
	"fmt"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/schemagate/schemagate/config/crd/bases"
)

// schemas is the compiled CRD, built once.
type schemas struct {
	structural *structuralschema.Structural
	openapi    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	once     sync.Once
	compiled *schemas
	errCRD   error
)

// load compiles the embedded CRD's schema of version v1alpha1.
func load() (*schemas, error) {
	once.Do(func() {
		var crd apiextensionsv1.CustomResourceDefinition
		if errCRD = yaml.UnmarshalStrict(bases.RoutingServiceCRD, &crd); errCRD != nil {
			return
		}
		var v1 *apiextensionsv1.JSONSchemaProps
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1alpha1" && v.Schema != nil {
				v1 = v.Schema.OpenAPIV3Schema
			}
		}
		if v1 == nil {
			errCRD = fmt.Errorf("the embedded CRD has no v1alpha1 schema")
			return
		}
		internal := &apiextensionsinternal.JSONSchemaProps{}
		if errCRD = apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, internal, nil); errCRD != nil {
			return
		}
		s := &schemas{}
		if s.structural, errCRD = structuralschema.NewStructural(internal); errCRD != nil {
			return
		}
		if s.openapi, _, errCRD = apiservervalidation.NewSchemaValidator(internal); errCRD != nil {
			return
		}
		s.cel = cel.NewValidator(s.structural, true, celconfig.PerCallLimit)
		compiled = s
	})
	return compiled, errCRD
}

// Object validates obj (a RoutingService as unstructured JSON: apiVersion, kind, metadata, spec)
// as the API server would on create. It fills in the CRD's defaults and prunes unknown fields in
// obj, as the server stores it, and returns the errors the server would answer (empty: valid),
// unknown fields included (the API server refuses them with strict field validation).
// An error is returned only when the embedded CRD cannot be compiled.
func Object(ctx context.Context, obj map[string]any) (field.ErrorList, error) {
	s, err := load()
	if err != nil {
		return nil, fmt.Errorf("compiling the RoutingService CRD: %w", err)
	}
	var errs field.ErrorList
	// Unknown fields, as the API server finds them: in metadata, then everywhere the schema
	// prunes (a typo'd field name), then in the embedded templates' metadata. kubectl apply asks
	// for strict field validation by default, and the server then refuses the object naming them.
	_, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), nil, err.Error()))
	}
	unknown = append(unknown, pruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	if _, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, s.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true}); len(paths) > 0 {
		unknown = append(unknown, paths...)
	}
	for _, path := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: path, BadValue: "",
			Detail: "unknown field: the API server refuses it under strict field validation (kubectl apply's default) and drops it otherwise"})
	}
	structuraldefaulting.Default(obj, s.structural)
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj, s.structural, false)...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, s.openapi)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	if s.cel != nil {
		celErrs, _ := s.cel.Validate(ctx, nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs, nil
}

// Decode reads one YAML or JSON document into unstructured JSON the way the API server decodes a
// request body (whole numbers as int64, so intOrString and integer fields validate as they would
// on the server).
func Decode(doc []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}
