#!/bin/bash
# Submits video-14b to GKE through xpk.
# Written by tpu-trainer 0.1.0 from training/ironwood/video-14b/bf16-tpu7x-4x4x4/xpk/run_recipe.sh.
# Slice: tpu7x-4x4x4 x1: 64 chips, 128 JAX devices, 16 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name xpk accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-test-user-video-14b-$(date +%Y%m%d-%H%M)}"
export WORKLOAD_NAME
if (( ${#WORKLOAD_NAME} > 40 )) || [[ "${WORKLOAD_NAME}" == *--* ]] \
    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "WORKLOAD_NAME=${WORKLOAD_NAME} is not a valid xpk workload name:" \
    "use lower-case letters, digits and single hyphens, at most 40 characters, starting with a letter." >&2
  exit 2
fi
export DATASET_DIR="${BASE_OUTPUT_DIR}/video_training"

# The project's number, which tpu-trainer passes to xpk (empty: xpk asks Cloud
# Resource Manager for it)
PROJECT_NUMBER="${PROJECT_NUMBER:-}"

# XLA flags, as the recipe gives them
XLA_FLAGS=" \
  --xla_enable_async_all_gather=true \
  --xla_tpu_enable_async_all_to_all=true \
  "

# maxdiffusion arguments: the recipe's, in its order, then the tool's
MAXDIFFUSION_ARGS="\
output_dir=${BASE_OUTPUT_DIR} \
train_data_dir=${DATASET_DIR} \
model_name=wan2.1 \
attention=flash \
prompt='a red fox running through fresh snow at dawn, cinematic lighting' \
per_device_batch_size=0.25 \
ici_data_parallelism=32 \
ici_fsdp_parallelism=4 \
max_train_steps=100 \
run_name=${WORKLOAD_NAME}"

xpk workload create \
  --cluster="${CLUSTER_NAME}" \
  --project="${PROJECT_ID}" \
  --zone="${ZONE}" \
  --priority="very-high" \
  --max-restarts="0" \
  --device-type="tpu7x-4x4x4" \
  --num-slices="1" \
  --docker-image="${WORKLOAD_IMAGE}" \
  --enable-debug-logs \
  --workload="${WORKLOAD_NAME}" \
  --project-number="${PROJECT_NUMBER}" \
  --skip-validation \
  --command="set -e && \
export JAX_PLATFORMS=tpu,cpu && \
pip install . && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
echo 'Starting training ...' && \
HF_HUB_CACHE=/dev/shm python3 -m src.maxdiffusion.train_wan src/maxdiffusion/configs/base_wan_14b.yml ${MAXDIFFUSION_ARGS}"
