"""The simulated cluster's CRD validation (what its API server and the goldens' tests check
with): defaults, nullable, strict fields, metadata, hand-written CEL rules."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.errors import ConfigError, TpuTrainerError
from tpu_trainer.fakecloud import crd
from tpu_trainer.fakecloud.crd import (
    CRD_FILES,
    SHIPPED_CRDS,
    apply_defaults,
    crd_dir,
    crd_for,
    validate,
)

pytestmark = pytest.mark.unit


def flavor(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "1xtpu7x-256"},
        "spec": spec
        or {
            "nodeLabels": {
                "cloud.google.com/gke-tpu-accelerator": "tpu7x",
                "cloud.google.com/gke-tpu-topology": "4x4x8",
            }
        },
    }


def queue(*groups: dict[str, Any], api_version: str = "kueue.x-k8s.io/v1beta1") -> dict[str, Any]:
    tpu_group = {
        "coveredResources": ["google.com/tpu"],
        "flavors": [
            {"name": "1xtpu7x-256", "resources": [{"name": "google.com/tpu", "nominalQuota": 128}]}
        ],
    }
    return {
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {"namespaceSelector": {}, "resourceGroups": list(groups) or [tpu_group]},
    }


def ray_cluster(worker: dict[str, Any] | None = None) -> dict[str, Any]:
    """The KubeRay quick-start RayCluster: its worker group sets neither minReplicas nor maxReplicas."""
    pod = {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "raycluster-kuberay", "namespace": "default"},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-head",
                                "image": "rayproject/ray:2.46.0",
                                "ports": [{"containerPort": 6379, "name": "gcs-server"}],
                                "resources": {"limits": {"cpu": "1", "memory": "2G"}},
                            }
                        ]
                    }
                },
            },
            "workerGroupSpecs": [
                worker
                or {
                    "groupName": "workergroup",
                    "replicas": 1,
                    "rayStartParams": {},
                    "template": {"spec": pod},
                }
            ],
        },
    }


def jobset() -> dict[str, Any]:
    container = {"name": "jax-tpu", "image": "python:3.11", "command": ["python", "-c", "1"]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train-run", "namespace": "default"},
        "spec": {
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                {
                    "name": "slice-job",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 32,
                            "completions": 32,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [container]}
                            },
                        }
                    },
                }
            ],
        },
    }


# ---- valid objects -------------------------------------------------------------------------------
@pytest.mark.parametrize("api_version", ["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"])
def test_valid_kueue_objects_pass_in_both_served_versions(api_version: str) -> None:
    local_queue = {
        "apiVersion": api_version,
        "kind": "LocalQueue",
        "metadata": {"name": "multislice-queue", "namespace": "default"},
        "spec": {"clusterQueue": "cluster-queue"},
    }
    assert validate({**flavor(), "apiVersion": api_version}) == []
    assert validate(queue(api_version=api_version)) == []
    assert validate(local_queue) == []


def test_valid_jobset_passes() -> None:
    assert validate(jobset()) == []


def test_ray_cluster_without_min_and_max_replicas_passes_thanks_to_defaults() -> None:
    obj = ray_cluster()
    assert validate(obj) == []
    worker = obj["spec"]["workerGroupSpecs"][0]
    assert "minReplicas" not in worker, "validate must not change its argument"
    schema = crd_for("ray.io", "RayCluster").schemas["v1"]
    defaulted = copy.deepcopy(obj)
    apply_defaults(defaulted, schema)
    filled = defaulted["spec"]["workerGroupSpecs"][0]
    assert (filled["minReplicas"], filled["maxReplicas"]) == (0, 2147483647)


def test_defaults_apply_inside_defaulted_objects() -> None:
    obj = queue()
    apply_defaults(obj, crd_for("kueue.x-k8s.io", "ClusterQueue").schemas["v1beta1"])
    assert obj["spec"]["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    assert obj["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_nullable_field_accepts_null_and_other_nulls_are_pruned() -> None:
    obj = ray_cluster()
    obj["status"] = {"lastUpdateTime": None}  # nullable: true in the CRD
    obj["spec"]["enableInTreeAutoscaling"] = None  # not nullable: the API server drops it
    assert validate(obj) == []


# ---- invalid objects -----------------------------------------------------------------------------
def test_typo_field_fails_in_strict_mode_only() -> None:
    typo = flavor(nodeLabel={"cloud.google.com/gke-tpu-accelerator": "tpu7x"})
    assert validate(typo) == ["spec.nodeLabel: unknown field"]
    assert validate(typo, strict=False) == []


def test_typo_deep_in_a_pod_template_fails() -> None:
    worker = ray_cluster()["spec"]["workerGroupSpecs"][0]
    worker["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    errors = validate(ray_cluster(worker))
    assert errors == [
        "spec.workerGroupSpecs[0].template.spec.containers[0].imagePullPolice: unknown field"
    ]


def test_wrong_types_fail() -> None:
    labels = flavor(nodeLabels={"cloud.google.com/gke-tpu-topology": 448})
    assert validate(labels) == [
        "spec.nodeLabels[\"cloud.google.com/gke-tpu-topology\"]: 448 is not of type 'string'"
    ]
    bad_quota = queue()
    bad_quota["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = [128]
    assert validate(bad_quota) == [
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "[128] must be an integer or a string"
    ]


def test_enum_pattern_and_int32_range_are_checked() -> None:
    obj = queue()
    obj["spec"]["queueingStrategy"] = "FIFO"
    obj["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "1xTPU7x-256"
    errors = validate(obj)
    assert any(e.startswith("spec.queueingStrategy: 'FIFO' is not one of") for e in errors)
    assert any(e.startswith("spec.resourceGroups[0].flavors[0].name: '1xTPU7x") for e in errors)
    worker = ray_cluster()["spec"]["workerGroupSpecs"][0]
    worker["replicas"] = 2**31
    assert validate(ray_cluster(worker)) == [
        "spec.workerGroupSpecs[0].replicas: 2147483648 is not a 'int32'"
    ]


def test_cel_rule_flavor_resources_must_match_covered_resources() -> None:
    group = {
        "coveredResources": ["google.com/tpu"],
        "flavors": [
            {
                "name": "1xtpu7x-256",
                "resources": [
                    {"name": "google.com/tpu", "nominalQuota": 128},
                    {"name": "cpu", "nominalQuota": 480},
                ],
            }
        ],
    }
    for version in ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"):
        assert validate(queue(group, api_version=version)) == [
            "spec.resourceGroups[0]: flavors must have the same number of resources as the "
            "coveredResources"
        ]


def test_cel_rule_borrowing_limit_needs_a_cohort() -> None:
    obj = queue()
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 8
    assert validate(obj) == ["spec: borrowingLimit must be nil when cohort is empty"]
    obj["spec"]["cohort"] = "tpu-cohort"
    assert validate(obj) == []


def test_cel_rule_taint_effect() -> None:
    obj = flavor(nodeTaints=[{"key": "google.com/tpu", "value": "present", "effect": "NoSchedul"}])
    assert validate(obj) == [
        "spec.nodeTaints: supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
        "'NoExecute'"
    ]


def test_duplicate_list_map_keys_fail() -> None:
    obj = queue()
    flavors = obj["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    assert validate(obj) == ["spec.resourceGroups[0].flavors[1]: duplicate entry ('1xtpu7x-256',)"]


def test_metadata_is_checked_by_hand() -> None:
    nameless = flavor()
    nameless["metadata"] = {"labels": {"team": "ml"}}
    assert validate(nameless) == ["metadata.name: required"]
    upper = flavor()
    upper["metadata"]["name"] = "1xTPU7x-256"
    assert validate(upper)[0].startswith("metadata.name: '1xTPU7x-256' is not a DNS subdomain")
    typo = flavor()
    typo["metadata"]["label"] = {"team": "ml"}
    assert validate(typo) == ["metadata.label: unknown field"]
    missing = flavor()
    del missing["metadata"]
    assert validate(missing) == ["metadata: required"]


def test_unserved_version_and_unknown_kind() -> None:
    assert validate({**flavor(), "apiVersion": "kueue.x-k8s.io/v1beta3"}) == [
        "apiVersion: kueue.x-k8s.io/v1beta3 is not served by kueue.x-k8s.io_resourceflavors.yaml "
        "(served: kueue.x-k8s.io/v1beta1, kueue.x-k8s.io/v1beta2)"
    ]
    with pytest.raises(TpuTrainerError, match="no CRD is registered for Cohort"):
        validate({**flavor(), "kind": "Cohort"})


# ---- where the CRDs come from --------------------------------------------------------------------
def test_crd_folder_comes_from_the_environment_else_the_package() -> None:
    assert crd_dir({}) == SHIPPED_CRDS
    assert crd_dir({"TPU_TRAINER_CRDS": ""}) == SHIPPED_CRDS
    assert crd_dir({"TPU_TRAINER_CRDS": "/opt/crds"}) == Path("/opt/crds")
    assert crd.available({})
    assert not crd.available({"TPU_TRAINER_CRDS": "/nonexistent/crds"})


def test_other_crd_folder_is_used_and_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    relative = CRD_FILES[("kueue.x-k8s.io", "ResourceFlavor")]
    (tmp_path / relative).parent.mkdir(parents=True)
    shutil.copy(SHIPPED_CRDS / relative, tmp_path / relative)
    assert validate(flavor(), folder=tmp_path) == []
    assert crd_for("kueue.x-k8s.io", "ResourceFlavor", folder=tmp_path).path.parent.parent == (
        tmp_path
    )
    with pytest.raises(ConfigError) as info:
        validate(queue(), folder=tmp_path)
    assert "TPU_TRAINER_CRDS" in info.value.fix


def test_every_registered_crd_exists_and_matches_its_kind() -> None:
    for (group, kind), relative in CRD_FILES.items():
        loaded = crd.load_crd(SHIPPED_CRDS / relative)
        assert (loaded.group, loaded.kind) == (group, kind)
