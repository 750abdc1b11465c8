#!/bin/bash
# Creates .venv with tpu-trainer installed (add `dev` as the first argument for the test tools).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "${PYTHON}" -m venv .venv
fi
if [[ "${1:-}" == "dev" ]]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
else
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
fi
