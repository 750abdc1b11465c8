#!/bin/bash
# Prepares the environment and the training image.
# Written by tpu-trainer 0.1.0 from training/ironwood/densemodel-70b/4k-bf16-tpu7x-4x8x8-gcs/xpk/run_recipe.sh.
# Slice: tpu7x-4x8x8 x1: 256 chips, 512 JAX devices, 64 hosts (TPU v7 (Ironwood)).
set -euo pipefail

export PROJECT_ID="demo-project"
export CLUSTER_NAME="demo-cluster"
export REGION="us-central1"
export ZONE="us-central1-ai1a"
export WORKLOAD_IMAGE="gcr.io/demo-project/maxtext-runner"
export MAXTEXT_BRANCH="main"
export JAX_VERSION="0.8.1"
export LIBTPU_VERSION="0.0.31"

echo "Fetching credentials for cluster ${CLUSTER_NAME} (${REGION})"
gcloud container clusters get-credentials "${CLUSTER_NAME}" \
  --region="${REGION}" --project="${PROJECT_ID}"

if docker manifest inspect "${WORKLOAD_IMAGE}" >/dev/null 2>&1; then
  echo "Image ${WORKLOAD_IMAGE} exists; skipping the build."
  exit 0
fi

echo "Building ${WORKLOAD_IMAGE} from MaxText ${MAXTEXT_BRANCH} (jax ${JAX_VERSION}, libtpu ${LIBTPU_VERSION})"
gcloud auth configure-docker "${WORKLOAD_IMAGE%%/*}" --quiet
BUILD_DIR="$(mktemp -d)"
trap 'rm -rf "${BUILD_DIR}"' EXIT
git clone --depth 1 --branch "${MAXTEXT_BRANCH}" \
  https://github.com/AI-Hypercomputer/maxtext.git "${BUILD_DIR}/maxtext"
cd "${BUILD_DIR}/maxtext"
export MAXTEXT_REPO_ROOT="${PWD}"
if [[ -f src/dependencies/scripts/docker_build_dependency_image.sh ]]; then
  DEPS_SCRIPT=src/dependencies/scripts/docker_build_dependency_image.sh
  RUNNER_FILE=src/dependencies/dockerfiles/maxtext_runner.Dockerfile
else
  DEPS_SCRIPT=docker_build_dependency_image.sh
  RUNNER_FILE=maxtext_runner.Dockerfile
fi
bash "${DEPS_SCRIPT}" MODE=stable DEVICE=tpu \
  JAX_VERSION="${JAX_VERSION}" LIBTPU_VERSION="${LIBTPU_VERSION}"
docker build --build-arg BASEIMAGE=maxtext_base_image --build-arg PACKAGE_DIR=src \
  -f "${RUNNER_FILE}" -t "${WORKLOAD_IMAGE}" .
docker push "${WORKLOAD_IMAGE}"
echo "Pushed ${WORKLOAD_IMAGE}"
