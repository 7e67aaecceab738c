// The layering of docs/architecture.md ("Components") as a lint rule: a file in one
// top-level folder may import only from the folders its row names. Relative imports are
// resolved against the importing file, so `../../handlers/x.js` counts wherever it is written.
import { dirname, relative, resolve, sep } from 'node:path';

const PRODUCT = [
  'crds',
  'framework',
  'providers',
  'health',
  'book',
  'discovery',
  'gateway',
  'handlers',
  'charts',
  'cmd',
];

/** folder → the other folders of ours it may import. Anything not listed may import nothing of ours. */
export const LAYERS = {
  crds: [],
  framework: [],
  health: [],
  // The lease book: leases, sessions, cooldowns, holds, tokens and quotas; no HTTP, no Kubernetes.
  book: [],
  // The two ways in to the book are siblings: the HTTP API and the forward-proxy gateway never
  // import each other (each may import the book; handlers/ wires them).
  discovery: ['book'],
  // The gateway owns its ports (GatewayBook, TokenVerifier); handlers/ wires them to the book.
  gateway: ['book'],
  providers: ['crds'],
  handlers: ['crds', 'framework', 'providers', 'health', 'book', 'discovery', 'gateway'],
  charts: ['crds'],
  cmd: ['crds', 'framework', 'providers', 'health', 'book', 'discovery', 'gateway', 'handlers', 'charts'],
  // Benchmarks use the product, never the tests' harness.
  bench: [...PRODUCT, 'client'],
  // The client package is published on its own: it may import nothing of the operator's.
  client: [],
  test: [...PRODUCT, 'bench', 'test', 'eslint', 'client'],
  eslint: [],
};

/**
 * folder → the packages it may not import: what the room must know nothing about. The lease
 * book serves two doors (the HTTP API and the gateway), so it knows neither HTTP nor
 * Kubernetes; the rooms that are components of their own know no Kubernetes.
 */
const KUBERNETES = ['@kubernetes/client-node'];
const HTTP = ['express', 'node:http', 'node:https', 'node:http2', 'http', 'https', 'http2', 'undici'];
export const FORBIDDEN_PACKAGES = {
  book: [...KUBERNETES, ...HTTP],
  health: KUBERNETES,
  discovery: KUBERNETES,
  gateway: KUBERNETES,
};

/** framework/testing/ is the tests' harness: product code (the demo, try-plugin) uses framework/control-plane/. */
function isHarness(root, file) {
  const rel = relative(root, file).split(sep);
  return rel[0] === 'framework' && rel[1] === 'testing';
}

function topFolder(root, file) {
  const rel = relative(root, file);
  if (rel.startsWith('..')) return undefined;
  const [first, ...rest] = rel.split(sep);
  return rest.length > 0 ? first : undefined;
}

const importsDownward = {
  meta: {
    type: 'problem',
    docs: { description: 'imports follow the layering table of docs/architecture.md' },
    schema: [],
    messages: {
      upward:
        '{{from}}/ may not import from {{to}}/ (docs/architecture.md, Components: {{from}}/ may import {{allowed}})',
      harness:
        '{{from}}/ may not import the test harness framework/testing/ (the control plane is framework/control-plane/)',
      package: '{{from}}/ may not import {{name}} (docs/architecture.md: {{from}}/ knows nothing of it)',
    },
  },
  create(context) {
    const root = context.cwd;
    const file = context.filename;
    const from = topFolder(root, file);
    if (!from || !(from in LAYERS)) return {};
    const allowed = new Set([from, ...LAYERS[from]]);
    const forbidden = FORBIDDEN_PACKAGES[from] ?? [];
    function check(node, source) {
      if (typeof source !== 'string') return;
      const name = forbidden.find((p) => source === p || source.startsWith(`${p}/`));
      if (name !== undefined) {
        context.report({ node, messageId: 'package', data: { from, name } });
        return;
      }
      if (!source.startsWith('.')) return;
      const target = resolve(dirname(file), source);
      if (PRODUCT.includes(from) && from !== 'framework' && isHarness(root, target)) {
        context.report({ node, messageId: 'harness', data: { from } });
        return;
      }
      const to = topFolder(root, target);
      if (!to || allowed.has(to) || !(to in LAYERS)) return;
      context.report({
        node,
        messageId: 'upward',
        data: { from, to, allowed: LAYERS[from].length ? LAYERS[from].join(', ') : 'nothing of ours' },
      });
    }
    return {
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node, node.source.value),
    };
  },
};

export const layersPlugin = { rules: { 'imports-downward': importsDownward } };
