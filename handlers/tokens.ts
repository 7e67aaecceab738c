/** DI tokens for the process-wide pieces the entry point creates once. */
export const METRICS_REGISTRY = Symbol('MetricsRegistry');
export const ROOT_LOGGER = Symbol('RootLogger');
