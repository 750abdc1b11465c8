#!/bin/bash
# Submits mixtral-moe to GKE through xpk.
# Written by tpu-trainer 0.1.0 from training/ironwood/mixtral-moe/4k-fp8-tpu7x-4x4x4/run_recipe.sh.
# Slice: tpu7x-4x4x4 x1: 64 chips, 128 JAX devices, 16 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name xpk accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-test-user-mixtral-moe-$(date +%Y%m%d-%H%M)}"
export WORKLOAD_NAME
if (( ${#WORKLOAD_NAME} > 40 )) || [[ "${WORKLOAD_NAME}" == *--* ]] \
    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "WORKLOAD_NAME=${WORKLOAD_NAME} is not a valid xpk workload name:" \
    "use lower-case letters, digits and single hyphens, at most 40 characters, starting with a letter." >&2
  exit 2
fi
export ARTIFACT_DIR="${BASE_OUTPUT_DIR}/${WORKLOAD_NAME}"

# The project's number, which tpu-trainer passes to xpk (empty: xpk asks Cloud
# Resource Manager for it)
PROJECT_NUMBER="${PROJECT_NUMBER:-}"

# XLA flags, as the recipe gives them
XLA_FLAGS=" \
  --xla_tpu_enable_sparse_core_collective_offload_all_gather=true \
  --xla_tpu_scoped_vmem_limit_kib=61440 \
  "

# maxtext arguments: the recipe's, in its order, then the tool's
MAXTEXT_ARGS="\
model_name=mixtral-8x7b \
per_device_batch_size=4 \
max_target_length=4096 \
ici_fsdp_parallelism=-1 \
megablox=True \
sparse_matmul=True \
quantization=fp8_full \
use_qwix_quantization=True \
weight_quantization_calibration_method=fixed,-224,224 \
act_quantization_calibration_method=fixed,-224,224 \
profiler=xplane \
profiler_steps=3 \
dataset_type=synthetic \
steps=30 \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME} \
skip_first_n_steps_for_profiler=5"

xpk workload create \
  --cluster="${CLUSTER_NAME}" \
  --project="${PROJECT_ID}" \
  --zone="${ZONE}" \
  --priority="medium" \
  --max-restarts="0" \
  --device-type="tpu7x-4x4x4" \
  --num-slices="1" \
  --docker-image="${WORKLOAD_IMAGE}" \
  --enable-debug-logs \
  --workload="${WORKLOAD_NAME}" \
  --project-number="${PROJECT_NUMBER}" \
  --skip-validation \
  --command="set -e && \
set -o pipefail && \
export ENABLE_PATHWAYS_PERSISTENCE=1 && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export ARTIFACT_DIR=${ARTIFACT_DIR} && \
export JAX_PLATFORMS=tpu,cpu && \
python3 -m maxtext.trainers.pre_train.train maxtext/configs/base.yml ${MAXTEXT_ARGS} | \
tee train.log && \
gsutil cp train.log ${ARTIFACT_DIR}/logs/train-\${TPU_WORKER_ID}.log"
