#!/bin/bash
# Submits tinyllama-8b to GKE through xpk.
# Written by tpu-trainer 0.1.0 from training/ironwood/tinyllama-8b/8k-bf16-tpu7x-2x2x1/xpk/run_recipe.sh.
# Slice: tpu7x-2x2x1 x1: 4 chips, 8 JAX devices, 1 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name xpk accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-test-user-tinyllama-8b-$(date +%Y%m%d-%H%M)}"
export WORKLOAD_NAME
if (( ${#WORKLOAD_NAME} > 40 )) || [[ "${WORKLOAD_NAME}" == *--* ]] \
    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "WORKLOAD_NAME=${WORKLOAD_NAME} is not a valid xpk workload name:" \
    "use lower-case letters, digits and single hyphens, at most 40 characters, starting with a letter." >&2
  exit 2
fi

# The project's number, which tpu-trainer passes to xpk (empty: xpk asks Cloud
# Resource Manager for it)
PROJECT_NUMBER="${PROJECT_NUMBER:-}"

# XLA flags, as the recipe gives them
XLA_FLAGS=" \
  --xla_tpu_scoped_vmem_limit_kib=65536 \
  --xla_tpu_enable_async_collective_fusion_fuse_all_gather=false \
  --xla_enable_async_all_gather=true \
  "

# maxtext arguments: the recipe's, in its order, then the tool's
MAXTEXT_ARGS="\
model_name=llama3.1-8b \
per_device_batch_size=2 \
max_target_length=8192 \
ici_fsdp_parallelism=-1 \
remat_policy=full \
dataset_type=synthetic \
enable_checkpointing=False \
steps=20 \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME} \
profiler=xplane \
profiler_steps=3 \
skip_first_n_steps_for_profiler=5"

xpk workload create \
  --cluster="${CLUSTER_NAME}" \
  --project="${PROJECT_ID}" \
  --zone="${ZONE}" \
  --priority="very-high" \
  --max-restarts="0" \
  --device-type="tpu7x-2x2x1" \
  --num-slices="1" \
  --docker-image="${WORKLOAD_IMAGE}" \
  --enable-debug-logs \
  --workload="${WORKLOAD_NAME}" \
  --project-number="${PROJECT_NUMBER}" \
  --skip-validation \
  --command="set -e && \
export ENABLE_PATHWAYS_PERSISTENCE=1 && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export JAX_PLATFORMS=tpu,cpu && \
export ENABLE_PJRT_COMPATIBILITY=true && \
python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}"
