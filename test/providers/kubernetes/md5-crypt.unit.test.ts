import { md5Crypt, randomSalt } from '../../../providers/kubernetes/md5-crypt.js';

// Expected values from `openssl passwd -1 -salt abcdefgh <password>`; squid.int checks that
// Squid's basic_ncsa_auth accepts what it makes.
describe('MD5-crypt, the passwd hash the Squid Pods check credentials against', () => {
  it.each([
    ['secret', '$1$abcdefgh$cHJi5PXp/ki/ktXzqlk6I1'],
    ['a much longer password of 40 characters!', '$1$abcdefgh$9tsJnB3XiwKnYAdu3fl7B.'],
    ['x', '$1$abcdefgh$znAnv9M.XU2pRYfmSs46h/'],
    ['', '$1$abcdefgh$M55TzYaaccxVGbptZWaxX/'],
  ])('hashes %j as openssl passwd -1 does', (password, expected) => {
    expect(md5Crypt(password, 'abcdefgh')).toBe(expected);
  });

  it('salts every hash anew by default', () => {
    expect(randomSalt()).toMatch(/^[./0-9A-Za-z]{8}$/);
    expect(md5Crypt('same')).not.toBe(md5Crypt('same'));
  });
});
