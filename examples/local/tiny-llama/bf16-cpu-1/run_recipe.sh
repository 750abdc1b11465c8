#!/bin/bash
# A tiny Llama-style decoder in the tpu-recipes layout, sized to train in about a minute on a
# 2-core CPU. `tpu-trainer train examples/local/tiny-llama` runs it with real MaxText on this
# machine (device type cpu-1); the same arguments submit unchanged on a TPU slice.

export PROJECT_ID=""
export CLUSTER_NAME=""
export ZONE=""
export BASE_OUTPUT_DIR=""
export WORKLOAD_IMAGE=""
export WORKLOAD_NAME="$(printf "%.26s" "${USER//_/-}-tiny-llama")-$(date +%Y%m%d-%H%M)"

XLA_FLAGS=" "

MAXTEXT_ARGS="\
model_name=default \
base_emb_dim=256 \
base_num_decoder_layers=2 \
base_mlp_dim=512 \
base_num_query_heads=4 \
base_num_kv_heads=4 \
head_dim=64 \
per_device_batch_size=1 \
max_target_length=128 \
dataset_type=synthetic \
steps=20 \
enable_checkpointing=false \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME}"

xpk workload create \
  --cluster=$CLUSTER_NAME \
  --project=$PROJECT_ID \
  --zone=$ZONE \
  --priority=medium \
  --max-restarts=0 \
  --device-type=cpu-1 \
  --num-slices=1 \
  --docker-image="${WORKLOAD_IMAGE}" \
  --workload="${WORKLOAD_NAME}" \
  --command="set -e && export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
python3 -m maxtext.trainers.pre_train.train maxtext/configs/base.yml ${MAXTEXT_ARGS}"
