// Issue 50 item 4: the book's rules travel whole from the flags to whichever store keeps the
// book. Each row gives one rule a value the book refuses: the store built by each factory
// must refuse it naming the rule, which it can only do if the rule reached it (a factory that
// re-listed the fields and dropped one would build a store on that rule's default).
import { Redis } from 'ioredis';
import { DEFAULT_LEASE_BOOK_RULES, type LeaseBookRules } from '../../book/lease-book-settings.js';
import { memoryLeaseStore, type LeaseStoreFactory } from '../../handlers/lease-book.js';
import { redisLeaseStore } from '../../handlers/redis-lease-book.js';
import { silentLogger, TestCatalog } from '../book/fixtures.js';

// Never connects: the store checks its rules before its first call to Redis.
const redis = new Redis({ lazyConnect: true, host: '127.0.0.1', port: 1 });
afterAll(() => redis.disconnect());

const factories: [string, (rules: LeaseBookRules) => LeaseStoreFactory][] = [
  ['memory', (rules) => memoryLeaseStore(rules)],
  ['redis', (rules) => redisLeaseStore(rules, redis, 'factories')],
];

describe.each(factories)('the %s store factory', (_name, factory) => {
  it.each<[keyof LeaseBookRules, number]>([
    ['cooldownSeconds', -1],
    ['maxCooldownSeconds', DEFAULT_LEASE_BOOK_RULES.cooldownSeconds - 1],
    ['rateLimitCooldownSeconds', -1],
    ['maxRateLimitCooldownSeconds', DEFAULT_LEASE_BOOK_RULES.rateLimitCooldownSeconds - 1],
    ['suspicionTimeoutSeconds', 0],
    ['suspicionHoldoffSeconds', -1],
    ['sessionIdleSeconds', 0],
    ['maxSessions', 9_999],
  ])('hands %s = %d to the store, which refuses it naming the rule', (rule, value) => {
    const build = factory({ ...DEFAULT_LEASE_BOOK_RULES, [rule]: value });
    expect(() => build(new TestCatalog([]), silentLogger)).toThrow(new RegExp(`^${rule} must be`));
  });

  it("builds a store on the default rules (the control: each refusal above is its row's value)", () => {
    expect(() => factory(DEFAULT_LEASE_BOOK_RULES)(new TestCatalog([]), silentLogger)).not.toThrow();
  });
});
