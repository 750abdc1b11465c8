#!/bin/bash
# Submits Mistral-7B-MaxText to GKE through gcluster (Cluster Toolkit).
# Written by tpu-trainer 0.1.0 from training/trillium/Mistral-7B-MaxText/cluster_toolkit/run_recipe.sh.
# Slice: v6e-2x4 x1: 8 chips, 8 JAX devices, 2 hosts (TPU v6e (Trillium)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export ZONE="us-central1-ai1a"
export BASE_OUTPUT_DIR="gs://demo-bucket/runs"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
# A name gcluster accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most 28 characters.
WORKLOAD_NAME="${WORKLOAD_NAME:-u-mistral-7b-m-$(date +%Y%m%d-%H%M)}"
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
  --xla_tpu_scoped_vmem_limit_kib=98304 \
  --xla_tpu_enable_async_collective_fusion=true \
  --xla_tpu_overlap_compute_collective_tc=true \
  --xla_enable_async_all_gather=true \
  "

# maxtext arguments: the recipe's, in its order, then the tool's
MAXTEXT_ARGS="\
model_name=mistral-7b \
per_device_batch_size=4 \
ici_fsdp_parallelism=-1 \
remat_policy=full \
max_target_length=8192 \
attention=flash \
dataset_type=synthetic \
enable_checkpointing=False \
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
  --compute-type="ct6e-standard-4t" \
  --topology="2x4" \
  --num-slices="1" \
  --image="${WORKLOAD_IMAGE}" \
  --gke-namespace="default" \
  --name="${WORKLOAD_NAME}" \
  --command="set -e && \
set -o pipefail && \
export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
export ARTIFACT_DIR=${ARTIFACT_DIR} && \
export JAX_PLATFORMS=tpu,cpu && \
set +e ; \
if '[' -f MaxText/train.py ']' ; \
then python3 -u MaxText/train.py MaxText/configs/base.yml ${MAXTEXT_ARGS} 2>&1 | \
tee train.log ; \
else python3 -u -m maxtext.trainers.pre_train.train maxtext/configs/base.yml ${MAXTEXT_ARGS} 2>&1 | \
tee train.log ; \
fi ; \
TRAIN_EXIT_CODE=\${PIPESTATUS[0]} ; \
if '[' -s train.log ']' ; \
then if command -v gcloud &> /dev/null ; \
then gcloud storage cp train.log \${ARTIFACT_DIR}/logs/train-\${TPU_WORKER_ID:-\${HOSTNAME:-0}}.log || \
true ; \
elif command -v gsutil &> /dev/null ; \
then gsutil cp train.log \${ARTIFACT_DIR}/logs/train-\${TPU_WORKER_ID:-\${HOSTNAME:-0}}.log || \
true ; \
fi ; \
fi ; \
exit \${TRAIN_EXIT_CODE}"
