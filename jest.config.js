// ESM all the way: client-node 2.x is ESM-only, so tests run as native ES modules under
// node --experimental-vm-modules. ts-jest transpiles per file (isolatedModules); `npm run
// typecheck` does the whole-program type check once instead of once per test file.
const transform = {
  '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
};
const shared = {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: {
    // What plugins import the plugin API and the conformance kit by (the operator process
    // maps the first the same way at start-up; see providers/plugin-loader.ts).
    '^proxy-operator/plugin$': '<rootDir>/providers/plugin.ts',
    '^proxy-operator/conformance$': '<rootDir>/providers/conformance/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform,
  // Node's environment, plus a check that fails a test file leaving a TCP server listening in
  // the jest process: suites run in band in one process, and a leaked handle would keep the
  // run from exiting (there is no forceExit to hide one).
  testEnvironment: '<rootDir>/test/harness/leak-guard-environment.js',
};
export default {
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: ['<rootDir>/**/*.unit.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '/build/'],
    },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.int.test.ts'],
      globalSetup: '<rootDir>/test/harness/jest-global-setup.ts',
      globalTeardown: '<rootDir>/test/harness/jest-global-teardown.ts',
    },
  ],
  // testTimeout is global in jest (projects cannot set it): integration tests on a loaded
  // two-core machine need the room; unit tests finish long before it.
  testTimeout: 120000,
};
