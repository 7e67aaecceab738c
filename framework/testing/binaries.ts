// Moved to framework/control-plane/ (product code imports it from there); kept for tests.
export * from '../control-plane/binaries.js';
