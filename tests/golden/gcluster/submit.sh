#!/bin/bash
# Submits gemmoe-26b to GKE through gcluster (Cluster Toolkit).
# Written by tpu-trainer 0.1.0 from training/ironwood/gemmoe-26b/4k-bf16-tpu7x-4x4x4/cluster_toolkit/run_recipe.sh.
# Slice: tpu7x-4x4x4 x1: 64 chips, 128 JAX devices, 16 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name gcluster accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 28 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-test-user-gemm-$(date +%Y%m%d-%H%M)}"
export WORKLOAD_NAME
if (( ${#WORKLOAD_NAME} > 28 )) || [[ "${WORKLOAD_NAME}" == *--* ]] \
    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "WORKLOAD_NAME=${WORKLOAD_NAME} is not a valid gcluster workload name:" \
    "use lower-case letters, digits and single hyphens, at most 28 characters, starting with a letter." >&2
  exit 2
fi
export ARTIFACT_DIR="${BASE_OUTPUT_DIR}/${WORKLOAD_NAME}"

# XLA flags, as the recipe gives them
XLA_FLAGS=" \
  --xla_tpu_scoped_vmem_limit_kib=65536 \
  --xla_tpu_bf16_emission_mode=NATIVE_EMISSION \
  --xla_enable_async_all_gather=true \
  --xla_tpu_enable_latency_hiding_layer_scheduler=true \
  "

# maxtext arguments: the recipe's, in its order, then the tool's
MAXTEXT_ARGS="\
model_name=gemma3-27b \
dtype=bfloat16 \
per_device_batch_size=4 \
max_target_length=4096 \
enable_checkpointing=False \
remat_policy=full \
ici_fsdp_parallelism=-1 \
attention=flash \
dataset_type=synthetic \
steps=30 \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME} \
profiler=xplane \
profiler_steps=3 \
skip_first_n_steps_for_profiler=5"

gcluster job submit \
  --skip-prereqs \
  --queue="multislice-queue" \
  --cluster="${CLUSTER_NAME}" \
  --project="${PROJECT_ID}" \
  --location="${ZONE}" \
  --priority="medium" \
  --restarts="0" \
  --compute-type="tpu7x" \
  --topology="4x4x4" \
  --node-constraint="cloud.google.com/placement-policy-name=tpu7x-128-4x4x4-placement-policy" \
  --num-slices="1" \
  --image="${WORKLOAD_IMAGE}" \
  --verbose \
  --gke-namespace="default" \
  --name="${WORKLOAD_NAME}" \
  --command="set -e && \
set -o pipefail && \
export ENABLE_PATHWAYS_PERSISTENCE=1 && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export ARTIFACT_DIR=${ARTIFACT_DIR} && \
export JAX_PLATFORMS=tpu,cpu && \
export ENABLE_PJRT_COMPATIBILITY=true && \
set +e ; \
python3 -u -m maxtext.trainers.pre_train.train maxtext/configs/base.yml ${MAXTEXT_ARGS} | \
tee train.log ; \
TRAIN_EXIT_CODE=\${PIPESTATUS[0]} ; \
if '[' -s train.log ']' ; \
then timeout 30s gcloud storage cp --no-user-output-enabled train.log \${ARTIFACT_DIR}/logs/train-\${TPU_WORKER_ID:-\${JOBSET_WORKER_INDEX:-0}}.log || \
true ; \
fi ; \
exit \${TRAIN_EXIT_CODE}"
