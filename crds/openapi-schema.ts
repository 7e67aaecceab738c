// The subset of apiextensions.k8s.io/v1 that this project's CRDs use, spelled with the API
// server's own keys. client-node's model classes rename `x-kubernetes-*` to camelCase and
// only serialize back through its ObjectSerializer, so they cannot be written out as a manifest.

/** Turns a rule failure into a field error of this kind instead of the generic "Invalid value". */
export type ValidationReason =
  'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';

/** One CEL rule (`x-kubernetes-validations` entry). */
export interface ValidationRule {
  rule: string;
  message: string;
  /** Relative JSON path (e.g. `.provider`) the error is reported at, instead of the rule's own node. */
  fieldPath?: string;
  reason?: ValidationReason;
  /** Also evaluate the rule on create, with `oldSelf` an optional (empty on create). */
  optionalOldSelf?: boolean;
}

export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };

export interface JSONSchemaProps {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  format?: string;
  enum?: JSONValue[];
  default?: JSONValue;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  maxProperties?: number;
  required?: string[];
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps;
  items?: JSONSchemaProps;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: ValidationRule[];
}

export interface CustomResourceColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

export interface CustomResourceDefinitionVersion {
  name: string;
  served: boolean;
  storage: boolean;
  schema: { openAPIV3Schema: JSONSchemaProps };
  subresources?: { status?: Record<string, never> };
  additionalPrinterColumns?: CustomResourceColumn[];
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    versions: CustomResourceDefinitionVersion[];
  };
}
