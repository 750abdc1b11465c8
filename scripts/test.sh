#!/bin/bash
# Sets up everything the tests need, then runs lint, types and the test suite.
#   .venv                      the project and its dev tools (ruff, mypy, pytest, shellcheck)
#   $TPU_TRAINER_CACHE/xpk-V   xpk in its own venv (its parser checks generated command lines);
#                              kept outside the checkout and reused when present
#   $TPU_TRAINER_CACHE/maxtext-V  the MaxText runtime the local runs and checks use (same cache)
#   $TPU_TRAINER_CACHE/tunix-V    the Tunix runtime (its config parser checks generated files)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev

CACHE="${TPU_TRAINER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tpu-trainer}"
XPK_VERSION="$(.venv/bin/python -c 'from tpu_trainer.infra.tool_env import XPK_VERSION; print(XPK_VERSION)')"
XPK_VENV="${CACHE}/xpk-${XPK_VERSION}"
# xpk in its own venv, installed by the tool itself (once; about 3 minutes), as on first use.
TPU_TRAINER_CACHE="${CACHE}" .venv/bin/tpu-trainer runtime install xpk
export TPU_TRAINER_XPK_PYTHON="${XPK_VENV}/bin/python"

# The MaxText runtime (Python 3.12 venv, ~2.8 GB, minutes the first time) in the same cache.
TPU_TRAINER_CACHE="${CACHE}" .venv/bin/tpu-trainer runtime install maxtext
# The Tunix runtime (Python 3.12 venv with google-tunix, ~1.6 GB, ~90 s the first time): the
# tests load generated GRPO configurations with Tunix's own parser.
TPU_TRAINER_CACHE="${CACHE}" .venv/bin/tpu-trainer runtime install tunix
# Ray 2.60 on top of the MaxText runtime (seconds once MaxText is there): the KubeRay tests run a
# real Ray head on 127.0.0.1.
TPU_TRAINER_CACHE="${CACHE}" .venv/bin/tpu-trainer runtime install ray
# The Hugging Face runtime (transformers, accelerate and a CPU torch; ~1.2 GB, under a minute the
# first time): the generated training script is smoke-run on this CPU.
TPU_TRAINER_CACHE="${CACHE}" .venv/bin/tpu-trainer runtime install hf

extra=()
for dir in bench tools; do
  if compgen -G "${dir}/*.py" >/dev/null; then extra+=("${dir}"); fi
done
.venv/bin/ruff check src tests "${extra[@]}"
.venv/bin/mypy src tests "${extra[@]}"
# Three workers (pytest-xdist) on any number of cores: most of a rehearsal's time is spent waiting
# on real gcloud, kubectl and xpk processes, not computing. TPU_TRAINER_TEST_WORKERS=0 runs the
# tests in this process, one at a time.
.venv/bin/python -m pytest -n "${TPU_TRAINER_TEST_WORKERS:-3}" "$@"
