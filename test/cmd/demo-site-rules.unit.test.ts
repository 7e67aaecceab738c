import { siteAnswer, sourceAddress, type SiteAnswer, type SiteHistory } from '../../cmd/demo/site-rules.js';

// Issue 49 item 5: the strict demo site (`npm run demo -- --site`): 403 to the banned
// proxy's exit, 429 with Retry-After above a per-source rate.
describe('the strict demo site', () => {
  const rules = { banned: new Set(['127.0.0.2']), ratePerSecond: 2 };

  it.each<[string, Array<[string, number]>, SiteAnswer]>([
    ['the banned exit: 403, whatever the rate', [['127.0.0.2', 0]], { kind: 'banned' }],
    ['a first request', [['127.0.0.3', 0]], { kind: 'ok' }],
    [
      'up to the rate in a second',
      [
        ['127.0.0.3', 0],
        ['127.0.0.3', 500],
      ],
      { kind: 'ok' },
    ],
    [
      'one more within the second: 429, Retry-After when the oldest is a second old',
      [
        ['127.0.0.3', 0],
        ['127.0.0.3', 100],
        ['127.0.0.3', 200],
      ],
      { kind: 'rate_limited', retryAfterSeconds: 1 },
    ],
    [
      'per source: another exit has its own budget',
      [
        ['127.0.0.3', 0],
        ['127.0.0.3', 100],
        ['127.0.0.4', 200],
      ],
      { kind: 'ok' },
    ],
    [
      'a second later the window has moved on',
      [
        ['127.0.0.3', 0],
        ['127.0.0.3', 100],
        ['127.0.0.3', 1100],
      ],
      { kind: 'ok' },
    ],
    [
      'refused requests count: hammering through a 429 keeps it closed',
      [
        ['127.0.0.3', 0],
        ['127.0.0.3', 600],
        ['127.0.0.3', 900],
        ['127.0.0.3', 1300],
      ],
      { kind: 'rate_limited', retryAfterSeconds: 1 },
    ],
  ])('%s', (_, requests, expected) => {
    const history: SiteHistory = new Map();
    let last: SiteAnswer = { kind: 'ok' };
    for (const [source, at] of requests) last = siteAnswer(rules, history, source, at);
    expect(last).toEqual(expected);
  });

  it.each([
    ['::ffff:127.0.0.2', '127.0.0.2'],
    ['127.0.0.2', '127.0.0.2'],
    ['::1', '::1'],
    [undefined, ''],
  ])('source address of %s is %s', (remote, expected) => {
    expect(sourceAddress(remote)).toBe(expected);
  });
});
