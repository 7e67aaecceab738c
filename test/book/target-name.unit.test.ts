// The canonical target, as a table: what is canonicalized, and what is refused naming `target`.
import { targetName } from '../../book/target-name.js';

describe('a target is one canonical host name', () => {
  it.each([
    ['shop.example', 'shop.example'],
    ['Shop.Example', 'shop.example'],
    ['  SHOP.example  ', 'shop.example'],
    ['shop.example.', 'shop.example'],
    ['www.shop.example', 'www.shop.example'], // another host: its own cooldowns
    ['site-a', 'site-a'],
    ['my_site.example', 'my_site.example'],
    ['localhost', 'localhost'],
    ['127.0.0.1', '127.0.0.1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['::1', '::1'],
  ])('%s is %s', (given, target) => {
    expect(targetName(given)).toEqual({ ok: true, target });
  });

  it.each([
    ['https://shop.example/', /target must be a host name, not a URL: send 'shop\.example'/],
    ['http://Shop.Example:8080/a?b', /not a URL: send 'shop\.example'/],
    ['shop.example:443', /target must be a host name, without a port: send 'shop\.example'/],
    ['shop.example/a', /without a path or credentials: send 'shop\.example'/],
    ['user@shop.example', /without a path or credentials/],
    ['', /target must be 1 to 253 printable characters/],
    ['exa mple.com', /target must be 1 to 253 printable characters/],
    ['a'.repeat(254), /target must be 1 to 253/],
    ['#nope', /without a path or credentials/],
    ['shop..example', /target must be a host name \(letters/],
    ['-shop.example', /target must be a host name \(letters/],
    ['shop!.example', /target must be a host name \(letters/],
  ])('%s is refused', (given, message) => {
    const name = targetName(given);
    expect(name.ok).toBe(false);
    if (!name.ok) expect(name.message).toMatch(message);
  });
});
