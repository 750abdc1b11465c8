"""Kueue/xpk objects for a slice, repairs of a live cluster's objects, and the findings."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pytest
import yaml

from tpu_trainer.errors import InputError
from tpu_trainer.fakecloud.crd import validate
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.launchers.gke.kueue import (
    cluster_queue,
    cluster_queue_repair,
    configmap_patch,
    kueue_findings,
    local_queue,
    quantity,
    resource_flavor,
    resource_flavor_repair,
)
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

TPU7X_256 = Slice.parse("tpu7x-4x4x8")

# `kubectl get clusterqueue cluster-queue -o json` on a Kueue v0.19 cluster that xpk created for
# tpu7x-128 (4x4x4) with --cpu-limit/--memory-limit, plus a Pathways CPU group. kubectl shows the
# preferred version (v1beta2, Kueue's storage version) with the server's defaults filled in.
LIVE_CLUSTER_QUEUE = r"""
{
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ClusterQueue\",\"metadata\":{\"annotations\":{},\"name\":\"cluster-queue\"},\"spec\":{\"namespaceSelector\":{},\"preemption\":{\"reclaimWithinCohort\":\"Never\",\"withinClusterQueue\":\"LowerPriority\"},\"resourceGroups\":[{\"coveredResources\":[\"google.com/tpu\",\"cpu\",\"memory\"],\"flavors\":[{\"name\":\"1xtpu7x-128\",\"resources\":[{\"name\":\"google.com/tpu\",\"nominalQuota\":64},{\"name\":\"cpu\",\"nominalQuota\":3000},{\"name\":\"memory\",\"nominalQuota\":\"12000Gi\"}]}]},{\"coveredResources\":[\"cpu\",\"memory\"],\"flavors\":[{\"name\":\"cpu-user\",\"resources\":[{\"name\":\"cpu\",\"nominalQuota\":480},{\"name\":\"memory\",\"nominalQuota\":\"2000G\"}]}]}]}}\n"
        },
        "creationTimestamp": "2026-11-20T09:14:03Z",
        "finalizers": [
            "kueue.x-k8s.io/resource-in-use"
        ],
        "generation": 1,
        "name": "cluster-queue",
        "resourceVersion": "1763630043184211",
        "uid": "5d0c9f0e-8a55-4d1e-9a55-3c1f3b1d2e7a"
    },
    "spec": {
        "flavorFungibility": {
            "whenCanBorrow": "MayStopSearch",
            "whenCanPreempt": "TryNextFlavor"
        },
        "namespaceSelector": {},
        "preemption": {
            "borrowWithinCohort": {
                "policy": "Never"
            },
            "reclaimWithinCohort": "Never",
            "withinClusterQueue": "LowerPriority"
        },
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": [
                    "google.com/tpu",
                    "cpu",
                    "memory"
                ],
                "flavors": [
                    {
                        "name": "1xtpu7x-128",
                        "resources": [
                            {
                                "name": "google.com/tpu",
                                "nominalQuota": 64
                            },
                            {
                                "name": "cpu",
                                "nominalQuota": 3000
                            },
                            {
                                "name": "memory",
                                "nominalQuota": "12000Gi"
                            }
                        ]
                    }
                ]
            },
            {
                "coveredResources": [
                    "cpu",
                    "memory"
                ],
                "flavors": [
                    {
                        "name": "cpu-user",
                        "resources": [
                            {
                                "name": "cpu",
                                "nominalQuota": 480
                            },
                            {
                                "name": "memory",
                                "nominalQuota": "2000G"
                            }
                        ]
                    }
                ]
            }
        ],
        "stopPolicy": "None"
    },
    "status": {
        "admittedWorkloads": 1,
        "conditions": [
            {
                "lastTransitionTime": "2026-11-20T09:14:05Z",
                "message": "Can admit new workloads",
                "observedGeneration": 1,
                "reason": "Ready",
                "status": "True",
                "type": "Active"
            }
        ],
        "flavorsReservation": [
            {
                "name": "1xtpu7x-128",
                "resources": [
                    {"borrowed": "0", "name": "google.com/tpu", "total": "64"},
                    {"borrowed": "0", "name": "cpu", "total": "16"},
                    {"borrowed": "0", "name": "memory", "total": "64Gi"}
                ]
            },
            {
                "name": "cpu-user",
                "resources": [
                    {"borrowed": "0", "name": "cpu", "total": "0"},
                    {"borrowed": "0", "name": "memory", "total": "0"}
                ]
            }
        ],
        "flavorsUsage": [
            {
                "name": "1xtpu7x-128",
                "resources": [
                    {"borrowed": "0", "name": "google.com/tpu", "total": "64"},
                    {"borrowed": "0", "name": "cpu", "total": "16"},
                    {"borrowed": "0", "name": "memory", "total": "64Gi"}
                ]
            },
            {
                "name": "cpu-user",
                "resources": [
                    {"borrowed": "0", "name": "cpu", "total": "0"},
                    {"borrowed": "0", "name": "memory", "total": "0"}
                ]
            }
        ],
        "pendingWorkloads": 0,
        "reservingWorkloads": 1
    }
}
"""

# `kubectl get resourceflavor 1xtpu7x-128 -o json` on the same cluster.
LIVE_FLAVOR = r"""
{
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"ResourceFlavor\",\"metadata\":{\"annotations\":{},\"name\":\"1xtpu7x-128\"},\"spec\":{\"nodeLabels\":{\"cloud.google.com/gke-tpu-accelerator\":\"tpu7x\",\"cloud.google.com/gke-tpu-topology\":\"4x4x4\"}}}\n"
        },
        "creationTimestamp": "2026-11-20T09:14:03Z",
        "finalizers": [
            "kueue.x-k8s.io/resource-in-use"
        ],
        "generation": 1,
        "name": "1xtpu7x-128",
        "resourceVersion": "1763630043171032",
        "uid": "0b7e53a1-3c5d-4f44-8d0e-77f0a4c9e213"
    },
    "spec": {
        "nodeLabels": {
            "cloud.google.com/gke-tpu-accelerator": "tpu7x",
            "cloud.google.com/gke-tpu-topology": "4x4x4"
        }
    }
}
"""

# `kubectl get configmap my-cluster-resources-configmap -n default -o json`, field `data`.
LIVE_CONFIGMAP_DATA = {"tpu7x-128": "16"}

SLICES = ["tpu7x-4x4x8", "tpu7x-64", "v6e-16", "v5p-128"]


def live_queue(api_version: str = "kueue.x-k8s.io/v1beta2") -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(LIVE_CLUSTER_QUEUE)
    obj["apiVersion"] = api_version
    return obj


def live_flavor() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(LIVE_FLAVOR)
    return loaded


def tpu_group(obj: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = obj["spec"]["resourceGroups"][0]
    return group


def with_flavor(queue: dict[str, Any], name: str, quota: int | str) -> dict[str, Any]:
    """The live queue after someone added flavor ``name`` as xpk would."""
    out = copy.deepcopy(queue)
    tpu_group(out)["flavors"].append(
        {
            "name": name,
            "resources": [
                {"name": "google.com/tpu", "nominalQuota": quota},
                {"name": "cpu", "nominalQuota": 3000},
                {"name": "memory", "nominalQuota": "12000Gi"},
            ],
        }
    )
    return out


# ---- everything produced validates against the real CRDs ------------------------------------------
def test_live_fixtures_are_valid_kubernetes_objects() -> None:
    assert validate(live_queue()) == []
    assert validate(live_queue("kueue.x-k8s.io/v1beta1")) == []
    assert validate(live_flavor()) == []


@pytest.mark.parametrize("num_slices", [1, 2])
@pytest.mark.parametrize("device", SLICES)
def test_every_object_produced_validates_against_the_crds(device: str, num_slices: int) -> None:
    slice_ = Slice.parse(device)
    produced: list[Mapping[str, Any] | None] = [
        resource_flavor(slice_, num_slices),
        cluster_queue(slice_, num_slices),
        local_queue(),
        resource_flavor_repair(live_flavor(), slice_, num_slices),
    ]
    for version in ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"):
        live = live_queue(version)
        produced.append(cluster_queue_repair(live, slice_, num_slices))
        wrong = with_flavor(live, slice_.kueue_flavor(num_slices), 1)
        produced.append(cluster_queue_repair(wrong, slice_, num_slices))
    no_tpu_group = live_queue()
    del no_tpu_group["spec"]["resourceGroups"][0]
    produced.append(cluster_queue_repair(no_tpu_group, slice_, num_slices))
    findings = kueue_findings(
        "c", slice_, num_slices, flavor=None, cluster_queue=None, configmap_data=None
    )
    produced.extend(f.manifest for f in findings if f.manifest is not None)
    for obj in produced:
        assert obj is not None
        assert validate(obj) == [], obj


# ---- builders ------------------------------------------------------------------------------------
def test_resource_flavor_is_the_seed_template() -> None:
    assert resource_flavor(Slice.parse("tpu7x-4x8x8"), 1) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "1xtpu7x-512"},
        "spec": {
            "nodeLabels": {
                "cloud.google.com/gke-tpu-accelerator": "tpu7x",
                "cloud.google.com/gke-tpu-topology": "4x8x8",
            }
        },
    }
    v6e = resource_flavor(Slice.parse("v6e-16"), 2)
    assert v6e["metadata"]["name"] == "2xv6e-16"
    assert v6e["spec"]["nodeLabels"]["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"


def test_new_cluster_queue_has_the_flavor_and_admits_every_namespace() -> None:
    created = cluster_queue_repair(None, TPU7X_256, 2)
    assert created is not None
    assert created["metadata"] == {"name": "cluster-queue"}
    assert created["spec"]["namespaceSelector"] == {}
    assert created["spec"]["resourceGroups"] == [
        {
            "coveredResources": ["google.com/tpu"],
            "flavors": [
                {
                    "name": "2xtpu7x-256",
                    "resources": [{"name": "google.com/tpu", "nominalQuota": 256}],
                }
            ],
        }
    ]


def test_local_queue_is_xpks() -> None:
    assert local_queue() == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "multislice-queue", "namespace": "default"},
        "spec": {"clusterQueue": "cluster-queue"},
    }


# ---- repairs -------------------------------------------------------------------------------------
def test_repair_adds_a_missing_flavor_and_keeps_the_others() -> None:
    live = live_queue()
    repaired = cluster_queue_repair(live, TPU7X_256, 1)
    assert repaired is not None
    groups = repaired["spec"]["resourceGroups"]
    assert groups[0]["flavors"][0] == tpu_group(live)["flavors"][0]
    assert groups[0]["flavors"][1] == {
        "name": "1xtpu7x-256",
        "resources": [
            {"name": "google.com/tpu", "nominalQuota": 128},
            {"name": "cpu", "nominalQuota": 3000},
            {"name": "memory", "nominalQuota": "12000Gi"},
        ],
    }
    assert groups[1] == live["spec"]["resourceGroups"][1]
    untouched = {k: v for k, v in repaired["spec"].items() if k != "resourceGroups"}
    assert untouched == {k: v for k, v in live["spec"].items() if k != "resourceGroups"}
    assert live == live_queue(), "the current object must not be changed"


def test_repair_returns_an_applyable_object_without_server_fields() -> None:
    repaired = cluster_queue_repair(live_queue(), TPU7X_256, 1)
    assert repaired is not None
    assert repaired["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert repaired["metadata"] == {"name": "cluster-queue"}
    assert set(repaired) == {"apiVersion", "kind", "metadata", "spec"}


def test_repair_fixes_a_wrong_quota_only() -> None:
    wrong = with_flavor(live_queue(), "1xtpu7x-256", 64)
    repaired = cluster_queue_repair(wrong, TPU7X_256, 1)
    assert repaired is not None
    expected = copy.deepcopy(wrong["spec"])
    tpu_group({"spec": expected})["flavors"][1]["resources"][0]["nominalQuota"] = 128
    assert repaired["spec"] == expected


@pytest.mark.parametrize("quota", [128, "128", "0.128k"])
def test_repair_leaves_a_correct_queue_alone(quota: int | str) -> None:
    assert (
        cluster_queue_repair(with_flavor(live_queue(), "1xtpu7x-256", quota), TPU7X_256, 1) is None
    )


def test_repair_creates_a_tpu_group_when_none_covers_tpus() -> None:
    cpu_only = live_queue()
    del cpu_only["spec"]["resourceGroups"][0]
    repaired = cluster_queue_repair(cpu_only, Slice.parse("v5p-128"), 2)
    assert repaired is not None
    assert repaired["spec"]["resourceGroups"][0] == cpu_only["spec"]["resourceGroups"][0]
    assert repaired["spec"]["resourceGroups"][1] == {
        "coveredResources": ["google.com/tpu"],
        "flavors": [
            {"name": "2xv5p-128", "resources": [{"name": "google.com/tpu", "nominalQuota": 128}]}
        ],
    }


def test_repair_refuses_a_flavor_in_a_group_without_tpus() -> None:
    odd = live_queue()
    odd["spec"]["resourceGroups"][1]["flavors"][0]["name"] = "1xtpu7x-256"
    with pytest.raises(InputError, match=r"does not cover google\.com/tpu") as info:
        cluster_queue_repair(odd, TPU7X_256, 1)
    assert info.value.fix.startswith("kubectl edit clusterqueue cluster-queue")


def test_flavor_repair() -> None:
    assert resource_flavor_repair(None, TPU7X_256, 1) == resource_flavor(TPU7X_256, 1)
    assert resource_flavor_repair(live_flavor(), Slice.parse("tpu7x-4x4x4"), 1) is None
    relabelled = resource_flavor_repair(live_flavor(), TPU7X_256, 1)
    assert relabelled is not None
    assert relabelled["metadata"] == {"name": "1xtpu7x-128"}
    assert relabelled["spec"]["nodeLabels"]["cloud.google.com/gke-tpu-topology"] == "4x4x8"


def test_configmap_patch() -> None:
    assert configmap_patch("c", TPU7X_256, 1, {"tpu7x-256": "32", "tpu7x-128": "16"}) is None
    assert configmap_patch("c", TPU7X_256, 1, LIVE_CONFIGMAP_DATA) == {"data": {"tpu7x-256": "32"}}
    assert configmap_patch("c", TPU7X_256, 2, {"tpu7x-256": "32"}) == {"data": {"tpu7x-256": "64"}}
    assert configmap_patch("c", TPU7X_256, 1, None) == {"data": {"tpu7x-256": "32"}}


def test_quantity() -> None:
    assert quantity(128) == quantity("128") == quantity("0.128k") == quantity("1.28e2") == 128
    assert quantity("2Ki") == 2048
    assert quantity("500m") == Decimal("0.5")
    assert quantity("lots") is None
    assert quantity(True) is None


# ---- findings ------------------------------------------------------------------------------------
def test_no_findings_when_all_is_in_order() -> None:
    queue = with_flavor(live_queue(), "1xtpu7x-128", 64)
    del tpu_group(queue)["flavors"][1]
    findings = kueue_findings(
        "my-cluster",
        Slice.parse("tpu7x-4x4x4"),
        1,
        flavor=live_flavor(),
        cluster_queue=queue,
        configmap_data=LIVE_CONFIGMAP_DATA,
    )
    assert findings == []


def test_findings_for_a_cluster_set_up_for_another_slice() -> None:
    findings = kueue_findings(
        "my-cluster",
        TPU7X_256,
        1,
        flavor=None,
        cluster_queue=live_queue(),
        configmap_data=LIVE_CONFIGMAP_DATA,
    )
    assert [f.subject for f in findings] == [
        "ResourceFlavor 1xtpu7x-256",
        "ClusterQueue cluster-queue",
        "ConfigMap my-cluster-resources-configmap",
    ]
    flavor, queue, configmap = findings
    assert flavor.argv == ("kubectl", "apply", "-f", "-")
    assert yaml.safe_load(flavor.stdin or "") == resource_flavor(TPU7X_256, 1)
    assert flavor.fix.startswith("kubectl apply -f - <<'EOF'\napiVersion: kueue.x-k8s.io/v1beta2\n")
    assert flavor.fix.endswith("\nEOF")
    assert queue.message == (
        "ClusterQueue cluster-queue has no flavor 1xtpu7x-256: it needs google.com/tpu "
        "128 = 128 chips × 1 slice(s)"
    )
    assert queue.manifest == cluster_queue_repair(live_queue(), TPU7X_256, 1)
    assert configmap.message == (
        "ConfigMap my-cluster-resources-configmap has no tpu7x-256, but xpk needs "
        "tpu7x-256: '32' (32 = 32 hosts × 1 slice(s))"
    )
    assert configmap.fix == (
        "kubectl patch configmap my-cluster-resources-configmap -n default --type merge "
        """-p '{"data":{"tpu7x-256":"32"}}'"""
    )


def test_findings_name_wrong_values() -> None:
    findings = kueue_findings(
        "c",
        TPU7X_256,
        2,
        flavor=resource_flavor(TPU7X_256, 2),
        cluster_queue=with_flavor(live_queue(), "2xtpu7x-256", 128),
        configmap_data={"tpu7x-256": "32"},
    )
    assert [f.message for f in findings] == [
        "ClusterQueue cluster-queue gives flavor 2xtpu7x-256 google.com/tpu quota 128, "
        "but it needs 256 = 128 chips × 2 slice(s)",
        "ConfigMap c-resources-configmap has tpu7x-256: '32', but xpk needs tpu7x-256: '64' "
        "(64 = 32 hosts × 2 slice(s))",
    ]


def test_findings_when_nothing_exists() -> None:
    findings = kueue_findings(
        "c", TPU7X_256, 1, flavor=None, cluster_queue=None, configmap_data=None
    )
    assert [f.message for f in findings] == [
        "ResourceFlavor 1xtpu7x-256 does not exist: Kueue cannot admit 1 × tpu7x-4x4x8",
        "ClusterQueue cluster-queue does not exist (workloads are submitted through it)",
        "ConfigMap c-resources-configmap does not exist in namespace default: xpk reads "
        "tpu7x-256 from it (32 = 32 hosts × 1 slice(s))",
    ]
    assert findings[1].manifest == kueue.cluster_queue(TPU7X_256, 1)
    assert findings[2].fix == (
        "kubectl create configmap c-resources-configmap -n default --from-literal=tpu7x-256=32"
    )


def test_flavor_with_wrong_labels_is_reported_with_both_values() -> None:
    stale = live_flavor()
    stale["metadata"]["name"] = "1xtpu7x-256"
    (finding,) = kueue_findings(
        "c",
        TPU7X_256,
        1,
        flavor=stale,
        cluster_queue=with_flavor(live_queue(), "1xtpu7x-256", 128),
        configmap_data={"tpu7x-256": "32"},
    )
    assert finding.message == (
        "ResourceFlavor 1xtpu7x-256 selects nodes with cloud.google.com/gke-tpu-accelerator=tpu7x, "
        "cloud.google.com/gke-tpu-topology=4x4x4, but tpu7x-4x4x8 nodes have "
        "cloud.google.com/gke-tpu-accelerator=tpu7x, cloud.google.com/gke-tpu-topology=4x4x8"
    )
