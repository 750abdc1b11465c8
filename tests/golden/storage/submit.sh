#!/bin/bash
# Submits densemodel-70b to GKE through xpk.
# Written by tpu-trainer 0.1.0 from training/ironwood/densemodel-70b/4k-bf16-tpu7x-4x8x8-gcs/xpk/run_recipe.sh.
# Slice: tpu7x-4x8x8 x1: 256 chips, 512 JAX devices, 64 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name xpk accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-test-user-densemodel-70b-$(date +%Y%m%d-%H%M)}"
export WORKLOAD_NAME
if (( ${#WORKLOAD_NAME} > 40 )) || [[ "${WORKLOAD_NAME}" == *--* ]] \
    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "WORKLOAD_NAME=${WORKLOAD_NAME} is not a valid xpk workload name:" \
    "use lower-case letters, digits and single hyphens, at most 40 characters, starting with a letter." >&2
  exit 2
fi
export DATASET_VOLUME_NAME="dataset-gcsfuse-volume"
export DATASET_MOUNT="/tmp/dataset"

# The project's number, which tpu-trainer passes to xpk (empty: xpk asks Cloud
# Resource Manager for it)
PROJECT_NUMBER="${PROJECT_NUMBER:-}"

# XLA flags, as the recipe gives them
XLA_FLAGS=" \
  --xla_tpu_dvfs_p_state=3 \
  --xla_tpu_scoped_vmem_limit_kib=65536 \
  "

# maxtext arguments: the recipe's, in its order, then the tool's
MAXTEXT_ARGS="\
model_name=llama3.1-70b \
per_device_batch_size=2 \
max_target_length=4096 \
ici_fsdp_parallelism=-1 \
dataset_type=grain \
grain_file_type=arrayrecord \
grain_train_files=${DATASET_MOUNT}'/c4/3.0.1/*.arrayrecord' \
steps=30 \
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
  --tpu-type="tpu7x-4x8x8" \
  --num-slices="1" \
  --base-docker-image="${WORKLOAD_IMAGE}" \
  --enable-debug-logs \
  --workload="${WORKLOAD_NAME}" \
  --storage="${DATASET_VOLUME_NAME}" \
  --project-number="${PROJECT_NUMBER}" \
  --command="set -e && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export JAX_PLATFORMS=tpu,cpu && \
export MAXTEXT_ASSETS_ROOT=/deps/src/MaxText/assets MAXTEXT_PKG_DIR=/app/src/maxtext && \
cd /app && \
pip install --no-deps -e . && \
python3 -m src.maxtext.trainers.pre_train.train maxtext/configs/base.yml ${MAXTEXT_ARGS}"
