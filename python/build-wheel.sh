#!/usr/bin/env bash
# Builds the Python package's wheel into python/dist (npm run python:wheel) and prints its path.
# PIP_FIND_LINKS/PIP_NO_INDEX pass through: with .ci/python-wheels it builds offline.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-$here/../.ci/python/bin/python}"
[ -x "$python" ] || python=python3
rm -rf "$here/dist" "$here/build"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$here/dist" "$here" >&2
ls "$here"/dist/proxy_operator_client-*.whl
