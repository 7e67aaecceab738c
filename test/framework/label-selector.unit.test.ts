import { parseLabelSelector } from '../../framework/utils/label-selector.js';

describe('parseLabelSelector', () => {
  const labels = { app: 'proxy', tier: 'edge', 'crawl.example.com/cloud-init': 'true' };
  it.each([
    ['', true],
    ['app=proxy', true],
    ['app==proxy', true],
    ['app=other', false],
    ['app!=other', true],
    ['app!=proxy', false],
    ['crawl.example.com/cloud-init=true', true],
    ['tier', true],
    ['missing', false],
    ['!missing', true],
    ['!tier', false],
    ['tier in (edge, core)', true],
    ['tier in (core)', false],
    ['tier notin (core)', true],
    ['missing notin (core)', true],
    ['app=proxy,tier in (edge,core),!missing', true],
    ['app=proxy,tier=core', false],
  ])('"%s" matches the labels: %p', (selector, expected) => {
    expect(parseLabelSelector(selector)(labels)).toBe(expected);
  });

  it('treats missing labels as none', () => {
    expect(parseLabelSelector('!a')(undefined)).toBe(true);
  });

  it.each(['a b c', 'in (x)', '=x'])('rejects "%s" naming the selector', (selector) => {
    expect(() => parseLabelSelector(selector)).toThrow(`invalid label selector "${selector}"`);
  });
});
