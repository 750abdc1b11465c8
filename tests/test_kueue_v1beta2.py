"""The Kueue objects the tool writes are v1beta2 (Kueue v0.19's stored and served version), as
golden files, each valid against the vendored v1beta2 CRDs; v1beta1 objects read from a cluster
are repaired into v1beta2 with the fields v1beta2 renamed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from conftest import GOLDEN, check_golden
from tpu_trainer.fakecloud.crd import validate
from tpu_trainer.launchers.gke.kueue import (
    API_VERSION,
    as_v1beta2_spec,
    cluster_queue,
    cluster_queue_repair,
    kueue_findings,
    local_queue,
    resource_flavor,
)
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("device", "num_slices"), [("tpu7x-4x4x8", 1), ("v6e-16", 2)])
def test_new_kueue_objects_match_their_golden_files_and_the_v1beta2_crds(
    device: str, num_slices: int, update_golden: bool
) -> None:
    slice_ = Slice.parse(device)
    objects = [
        resource_flavor(slice_, num_slices),
        cluster_queue(slice_, num_slices),
        local_queue(),
    ]
    for obj in objects:
        assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert validate(obj) == [], obj
    text = yaml.safe_dump_all(objects, sort_keys=False)
    check_golden(GOLDEN / "kueue" / f"{num_slices}x{device}.yaml", text, update_golden)


def test_the_golden_files_themselves_are_valid_v1beta2() -> None:
    files = sorted((GOLDEN / "kueue").glob("*.yaml"))
    assert len(files) == 2
    for path in files:
        for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert obj["apiVersion"] == API_VERSION
            assert validate(obj) == [], (path.name, obj)


def _v1beta1_queue() -> dict[str, Any]:
    """A v1beta1 ClusterQueue using the two fields v1beta2 renamed."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue", "resourceVersion": "12", "uid": "u"},
        "spec": {
            "cohort": "tpus",
            "admissionChecks": ["provisioning"],
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["google.com/tpu"],
                    "flavors": [
                        {
                            "name": "1xtpu7x-128",
                            "resources": [{"name": "google.com/tpu", "nominalQuota": 64}],
                        }
                    ],
                }
            ],
        },
    }


def test_a_v1beta1_queue_is_repaired_into_v1beta2_with_its_renamed_fields_moved() -> None:
    old = _v1beta1_queue()
    assert validate(old) == []
    assert validate({**old, "apiVersion": API_VERSION}) != []  # cohort is not a v1beta2 field
    repaired = cluster_queue_repair(old, Slice.parse("tpu7x-4x4x8"), 1)
    assert repaired is not None
    assert repaired["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    spec = repaired["spec"]
    assert spec["cohortName"] == "tpus"
    assert "cohort" not in spec and "admissionChecks" not in spec
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": "provisioning"}]}
    assert [f["name"] for f in spec["resourceGroups"][0]["flavors"]] == [
        "1xtpu7x-128",
        "1xtpu7x-256",
    ]
    assert validate(repaired) == [], repaired


def test_conversion_keeps_v1beta2_fields_and_leaves_other_kinds_alone() -> None:
    spec = {"cohortName": "a", "admissionChecksStrategy": {"admissionChecks": [{"name": "x"}]}}
    assert as_v1beta2_spec("ClusterQueue", {**spec, "admissionChecks": ["x", "y"]}) == {
        "cohortName": "a",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "x"}, {"name": "y"}]},
    }
    assert as_v1beta2_spec("LocalQueue", {"clusterQueue": "q"}) == {"clusterQueue": "q"}


def test_the_pasted_fix_applies_v1beta2() -> None:
    findings = kueue_findings(
        "c",
        Slice.parse("tpu7x-4x4x8"),
        1,
        flavor=None,
        cluster_queue=_v1beta1_queue(),
        configmap_data={},
        local_queue_exists=False,
    )
    manifests = [f.manifest for f in findings if f.manifest is not None]
    assert [m["kind"] for m in manifests] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    for finding in findings:
        if finding.manifest is not None:
            assert "apiVersion: kueue.x-k8s.io/v1beta2\n" in finding.fix
            assert validate(finding.manifest) == []
