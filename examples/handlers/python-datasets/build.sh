#!/usr/bin/env bash
# Builds the datasets handler into one component: `./build.sh [OUT.wasm]`
# (default: ./datasets.wasm). Needs componentize-py 0.25.1 on the PATH (`pip
# install componentize-py==0.25.1`) or named by $COMPONENTIZE_PY, and the
# contract's WIT (this repository's `wit/`, or $DIAL_WIT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(realpath -m "${1:-$here/datasets.wasm}")"
wit="${DIAL_WIT:-$here/../../../wit}"
componentize_py="${COMPONENTIZE_PY:-componentize-py}"
mkdir -p "$(dirname "$out")"
cd "$here"
# No VIRTUAL_ENV: componentize-py would bundle that venv's site-packages too.
env -u VIRTUAL_ENV "$componentize_py" -q -d "$wit" -w handler componentize -p "$here" app -o "$out"
