// ESM all the way (the operator's plugin API is ESM): run with node --experimental-vm-modules
// (npm test). ts-jest transpiles each file; `npm run typecheck` checks types once.
export default {
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }] },
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
};
