// The spec-level CEL rules: what each mode requires and forbids, and that the provider never
// changes.
import type { ValidationRule } from './openapi-schema.js';

// "Unless Managed" / "unless External": each rule states one implication of the mode.
const notManaged = "self.mode != 'Managed'";
const notExternal = "self.mode != 'External'";
// On an update that changes the mode, spec.mode's own rule is the one mistake to report: the
// fields that go with the new mode are not a second and third one. `optionalOldSelf` makes
// these rules run on create too, where oldSelf has no value.
const modeChanged = 'oldSelf.hasValue() && oldSelf.value().mode != self.mode';
const modeRule = (rule: Omit<ValidationRule, 'optionalOldSelf'>): ValidationRule => ({
  ...rule,
  rule: `${modeChanged} || ${rule.rule}`,
  optionalOldSelf: true,
});

export const specModeRules: ValidationRule[] = [
  modeRule({
    rule: `${notManaged} || has(self.provider)`,
    message: 'spec.provider is required when spec.mode is Managed',
    fieldPath: '.provider',
    reason: 'FieldValueRequired',
  }),
  modeRule({
    rule: `${notExternal} || !has(self.provider)`,
    message: 'spec.provider must not be set when spec.mode is External (the operator does not provision it)',
    fieldPath: '.provider',
    reason: 'FieldValueForbidden',
  }),
  modeRule({
    rule: `${notExternal} || has(self.endpoint)`,
    message: 'spec.endpoint is required when spec.mode is External',
    fieldPath: '.endpoint',
    reason: 'FieldValueRequired',
  }),
  modeRule({
    rule: `${notManaged} || !has(self.endpoint)`,
    message: 'spec.endpoint must not be set when spec.mode is Managed (the provider assigns the address)',
    fieldPath: '.endpoint',
    reason: 'FieldValueForbidden',
  }),
  modeRule({
    rule: `${notExternal} || !has(self.placement)`,
    message: 'spec.placement applies only when spec.mode is Managed',
    fieldPath: '.placement',
    reason: 'FieldValueForbidden',
  }),
  modeRule({
    rule: `${notExternal} || !has(self.cloudInit)`,
    message: 'spec.cloudInit applies only when spec.mode is Managed',
    fieldPath: '.cloudInit',
    reason: 'FieldValueForbidden',
  }),
  {
    // A mode change is reported by spec.mode's own rule; it brings or drops the provider,
    // which is not a second mistake.
    rule:
      'self.mode != oldSelf.mode || has(self.provider) == has(oldSelf.provider) && ' +
      '(!has(self.provider) || self.provider == oldSelf.provider)',
    message: 'spec.provider is immutable: create a new Proxy to use another provider',
    fieldPath: '.provider',
  },
];
