// A small structural validator for the JSON Schema subset discovery/openapi.ts uses. Enough
// to hold real responses against the document; not a general JSON Schema implementation.
import type { SchemaObject } from '../../discovery/openapi.js';

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export function validate(
  value: unknown,
  schema: SchemaObject,
  schemas: Record<string, SchemaObject>,
  at = '$',
): string[] {
  if (schema.$ref !== undefined) {
    const name = schema.$ref.replace('#/components/schemas/', '');
    const target = schemas[name];
    if (target === undefined) return [`${at}: unresolved $ref ${schema.$ref}`];
    return validate(value, { ...target, ...withoutRef(schema) }, schemas, at);
  }
  if (schema.oneOf !== undefined) {
    const matching = schema.oneOf.filter((option) => validate(value, option, schemas, at).length === 0);
    if (matching.length !== 1)
      return [`${at}: matches ${matching.length} of oneOf's ${schema.oneOf.length} schemas`];
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((type) => hasType(value, type)))
      return [`${at}: expected ${types.join('|')}, got ${JSON.stringify(value)}`];
  }
  const errors: string[] = [];
  if (schema.enum !== undefined && !schema.enum.includes(value as string))
    errors.push(`${at}: ${JSON.stringify(value)} not in enum`);
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum)
      errors.push(`${at}: ${value} < minimum ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum)
      errors.push(`${at}: ${value} > maximum ${schema.maximum}`);
  }
  if (typeof value === 'string' && schema.format === 'date-time' && !ISO_DATE_TIME.test(value)) {
    errors.push(`${at}: ${value} is not a date-time`);
  }
  if (Array.isArray(value) && schema.minItems !== undefined && value.length < schema.minItems)
    errors.push(`${at}: ${value.length} items < minItems ${schema.minItems}`);
  if (Array.isArray(value) && schema.maxItems !== undefined && value.length > schema.maxItems)
    errors.push(`${at}: ${value.length} items > maxItems ${schema.maxItems}`);
  if (Array.isArray(value) && schema.items !== undefined) {
    value.forEach((item, i) => errors.push(...validate(item, schema.items!, schemas, `${at}[${i}]`)));
  }
  if (isObject(value)) {
    for (const key of schema.required ?? [])
      if (!(key in value)) errors.push(`${at}: missing required ${key}`);
    for (const [key, item] of Object.entries(value)) {
      const property = schema.properties?.[key];
      if (property !== undefined) errors.push(...validate(item, property, schemas, `${at}.${key}`));
      else if (schema.additionalProperties === false) errors.push(`${at}: unexpected property ${key}`);
      else if (typeof schema.additionalProperties === 'object') {
        errors.push(...validate(item, schema.additionalProperties, schemas, `${at}.${key}`));
      }
    }
  }
  return errors;
}

function withoutRef(schema: SchemaObject): SchemaObject {
  const { $ref: _ref, ...rest } = schema;
  return rest;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case 'null':
      return value === null;
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'array':
      return Array.isArray(value);
    case 'object':
      return isObject(value);
    default:
      return typeof value === type;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
