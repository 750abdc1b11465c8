"""What the Kubernetes API emulator serves for the real xpk, without kubectl: Kueue's
AdmissionCheck and ProvisioningRequestConfig, the controllers' Deployments kept once changed,
RBAC's 403 for a scenario's forbidden kinds, a JobSet create whose answer is lost; and the state
file left unwritten by reads that change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from test_simkube_units import SCENARIO
from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import read_state, transaction
from tpu_trainer.simcloud.kube.api import KubeApi, Target
from tpu_trainer.simcloud.kube.resources import find
from tpu_trainer.simcloud.kube.status import KubeError

pytestmark = pytest.mark.unit

DEPLOYMENTS = find("apps", "v1", "deployments")
PRIORITY_CLASSES = find("scheduling.k8s.io", "v1", "priorityclasses")
JOBSETS = find("jobset.x-k8s.io", "v1alpha2", "jobsets")


def _state(tmp_path: Path, **behaviours: object) -> Path:
    return init_state(parse_scenario({**SCENARIO, "behaviours": behaviours}), tmp_path / "s.json")


def _post(path: Path, target: Target, body: dict[str, Any]) -> Any:
    return KubeApi(path).handle("POST", target, {}, json.dumps(body).encode(), {})


def test_kueue_admission_checks_and_provisioning_configs_are_served_in_v1beta2(
    tmp_path: Path,
) -> None:
    state = _state(tmp_path)
    config = find("kueue.x-k8s.io", "v1beta1", "provisioningrequestconfigs")
    check = find("kueue.x-k8s.io", "v1beta1", "admissionchecks")
    assert config is not None and check is not None
    assert config.warning == "This version is deprecated. Use v1beta2 instead."
    body = {  # as xpk 1.16's kueue_config template writes it
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "dws-config"},
        "spec": {
            "provisioningClassName": "queued-provisioning.gke.io",
            "podSetUpdates": {
                "nodeSelector": [
                    {
                        "key": "autoscaling.gke.io/provisioning-request",
                        "valueFromProvisioningClassDetail": "ResizeRequestName",
                    }
                ]
            },
            "managedResources": ["google.com/tpu"],
        },
    }
    made = _post(state, Target(config, None), body)
    assert made.code == 201 and made.warnings[0].startswith("This version is deprecated")
    checked = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "AdmissionCheck",
        "metadata": {"name": "dws-prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
    }
    assert _post(state, Target(check, None), checked).code == 201
    stored = read_state(state)["kube_api"]["objects"]
    assert stored["kueue.x-k8s.io/provisioningrequestconfigs//dws-config"]["apiVersion"] == (
        "kueue.x-k8s.io/v1beta2"
    )


def test_the_kueue_controllers_deployment_keeps_a_patch(tmp_path: Path) -> None:
    assert DEPLOYMENTS is not None
    state = _state(tmp_path)
    target = Target(DEPLOYMENTS, "kueue-system", "kueue-controller-manager")
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "resources": {"limits": {"memory": "4096Mi"}}}
    ]}}}}  # fmt: skip
    headers = {"content-type": "application/strategic-merge-patch+json"}
    patched = KubeApi(state).handle("PATCH", target, {}, json.dumps(patch).encode(), headers)
    (container,) = patched.body["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.k8s.io/kueue/kueue:v0.19.2"  # merged by name
    again = KubeApi(state).handle("GET", target, {}, b"", {}).body
    assert again["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "memory": "4096Mi"
    }
    assert again["metadata"]["generation"] == 2
    listed = KubeApi(state).handle("GET", Target(DEPLOYMENTS, "kueue-system"), {}, b"", {})
    assert [d["metadata"]["name"] for d in listed.body["items"]] == ["kueue-controller-manager"]


def test_a_forbidden_kind_is_rbacs_403_for_writes_and_readable(tmp_path: Path) -> None:
    assert PRIORITY_CLASSES is not None
    state = _state(tmp_path, kube_forbidden=["priorityclasses.scheduling.k8s.io"])
    body = {"metadata": {"name": "very-low"}, "value": 100}
    with pytest.raises(KubeError) as refused:
        _post(state, Target(PRIORITY_CLASSES, None), body)
    assert refused.value.code == 403 and refused.value.reason == "Forbidden"
    assert refused.value.message == (
        'priorityclasses.scheduling.k8s.io "very-low" is forbidden: User "trainer@example.com" '
        'cannot create resource "priorityclasses" in API group "scheduling.k8s.io" at the '
        "cluster scope"
    )
    listed = KubeApi(state).handle("GET", Target(PRIORITY_CLASSES, None), {}, b"", {})
    assert listed.code == 200 and listed.body["items"] == []


def _jobset() -> dict[str, Any]:
    template = {
        "spec": {
            "nodeSelector": {
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "2x4",
            },
            "containers": [{"name": "jax-tpu", "image": "i", "command": ["true"]}],
        }
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "w"},
        "spec": {
            "replicatedJobs": [
                {"name": "slice-job", "replicas": 1, "template": {"spec": {"template": template}}}
            ]
        },
    }


@pytest.mark.parametrize("lost", [False, True])
def test_a_jobset_create_whose_answer_is_lost_is_made_all_the_same(
    tmp_path: Path, lost: bool
) -> None:
    assert JOBSETS is not None
    state = _state(tmp_path, workload_create_fails_after_submit=lost)
    made = _post(state, Target(JOBSETS, "default"), _jobset())
    assert made.code == 201 and made.lost is lost
    assert "w" in read_state(state)["workloads"]


def test_a_read_that_changes_nothing_leaves_the_state_file_as_it_was(tmp_path: Path) -> None:
    state = _state(tmp_path)
    before = state.stat().st_mtime_ns, state.stat().st_ino
    with transaction(state) as data:
        assert data["project"] == "p"
    assert (state.stat().st_mtime_ns, state.stat().st_ino) == before
    with transaction(state) as data:
        data["seq"] += 1
    assert state.stat().st_ino != before[1]  # written again (atomically, a new file)
