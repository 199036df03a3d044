#!/usr/bin/env bash
# Creates (idempotently) the isolated virtualenv holding kubernetes-validate, which checks every
# manifest murphy generates (`murphy kubernetes render`, infra/kubernetes) against the Kubernetes
# API's JSON schemas, strictly (unknown fields fail). Kept out of murphy's own venv: its bundled
# schemas for every Kubernetes minor take ~50 MB, and murphy never imports it.
#
# usage: infra/ci/kubernetes_validate_venv.sh [DIR]   (default: <repo>/.venv-kubernetes-validate)
# prints the venv's python path on its last stdout line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${1:-${MURPHY_KUBERNETES_VALIDATE_VENV:-$repo/.venv-kubernetes-validate}}"
python="${KUBERNETES_VALIDATE_VENV_PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3

# 1.37.0 bundles schemas for Kubernetes 1.25 .. 1.37 (murphy supports 1.31 and later).
packages=(kubernetes-validate==1.37.0 "PyYAML>=6")
check='
import kubernetes_validate, importlib.metadata as md
v = md.version("kubernetes-validate")
assert v == "1.37.0", v
print("kubernetes-validate", v)
'
# shellcheck source=infra/ci/pinned_venv.sh
source "$here/pinned_venv.sh"
ensure_venv kubernetes-validate "$dir" "$python" "$check" "${packages[@]}"
