// The numbers the Proxy spec schema enforces and the defaults the API server fills in: one
// place, so the schema, the tests and the docs state the same ones.

/** Limits the schema enforces; exported so tests and docs state the same numbers. */
export const LIMITS = {
  /** GCP caps one metadata value at 256 KiB; anything near that belongs in a Secret, not in etcd. */
  cloudInitInlineMaxLength: 32 * 1024,
  attributesMaxProperties: 32,
  attributeKeyMaxLength: 63,
  attributeValueMaxLength: 253,
  maxLeasesMaximum: 1000,
  intervalSecondsMinimum: 2,
  intervalSecondsMaximum: 3600,
  timeoutSecondsMaximum: 300,
  thresholdMaximum: 100,
  expectedStatusCodesMaxItems: 16,
  probeURLMaxLength: 2048,
  hostMaxLength: 253,
  /** A week: longer than any outage worth waiting out, short enough to catch a typo'd unit. */
  unhealthyAfterSecondsMaximum: 7 * 24 * 3600,
  /** A rotation younger than 5 minutes would spend the budget on churn; a year is plenty. */
  maxAgeSecondsMinimum: 300,
  maxAgeSecondsMaximum: 365 * 24 * 3600,
  /** More targets than any one crawl would have banned at once. */
  whenCoolingDownOnMaximum: 10_000,
} as const;

export const DEFAULTS = {
  port: 3128,
  maxLeases: 5,
  probeURL: 'https://www.gstatic.com/generate_204',
  intervalSeconds: 30,
  timeoutSeconds: 5,
  failureThreshold: 3,
  successThreshold: 1,
  expectedStatusCodes: [200, 204],
} as const;
