"""The Kubernetes API emulator's parts without kubectl: patches, selectors, Status bodies,
admission against the CRDs, generation bookkeeping, discovery, OpenAPI, nodes, kubeconfig."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import read_state, transaction
from tpu_trainer.simcloud.gcloud_env import TOKEN
from tpu_trainer.simcloud.kube import discovery, protobuf, store
from tpu_trainer.simcloud.kube.admission import admit
from tpu_trainer.simcloud.kube.api import KubeApi, Target, parse_target
from tpu_trainer.simcloud.kube.kubeconfig import write_kubeconfig
from tpu_trainer.simcloud.kube.nodes import nodes
from tpu_trainer.simcloud.kube.openapi import openapi_v3
from tpu_trainer.simcloud.kube.patch import json_patch, merge_patch, strategic_merge
from tpu_trainer.simcloud.kube.resources import find
from tpu_trainer.simcloud.kube.selectors import field_selector, label_selector
from tpu_trainer.simcloud.kube.status import KubeError, not_found
from tpu_trainer.simcloud.kube.watch import watch_events

pytestmark = pytest.mark.unit

CQ_V1BETA2 = find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
JOBSETS = find("jobset.x-k8s.io", "v1alpha2", "jobsets")
CONFIGMAPS = find("", "v1", "configmaps")
SCENARIO: dict[str, Any] = {
    "project": "p",
    "region": "us-central1",
    "cluster": {"name": "c"},
    "node_pools": [
        {
            "name": "np",
            "machine_type": "ct6e-standard-4t",
            "node_count": 2,
            "zone": "us-central1-a",
            "tpu_topology": "2x4",
        },
        {
            "name": "down",
            "machine_type": "e2-standard-8",
            "node_count": 1,
            "zone": "us-central1-a",
            "status": "ERROR",
        },
    ],
}


def _queue(quota: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["google.com/tpu"],
                    "flavors": [
                        {
                            "name": "f",
                            "resources": [{"name": "google.com/tpu", "nominalQuota": quota}],
                        }
                    ],
                }
            ]
        },
    }


def test_merge_json_and_strategic_patches() -> None:
    assert merge_patch({"a": 1, "b": {"c": 2}}, {"a": None, "b": {"d": 3}}) == {
        "b": {"c": 2, "d": 3}
    }
    assert merge_patch({"l": [1, 2]}, {"l": [3]}) == {"l": [3]}
    doc = {"data": {"x": "1"}, "l": [1]}
    ops = [
        {"op": "replace", "path": "/data/x", "value": "2"},
        {"op": "add", "path": "/l/-", "value": 2},
    ]
    assert json_patch(doc, ops) == {"data": {"x": "2"}, "l": [1, 2]}
    assert doc == {"data": {"x": "1"}, "l": [1]}
    with pytest.raises(KubeError) as failed:
        json_patch(doc, [{"op": "test", "path": "/data/x", "value": "9"}])
    assert failed.value.code == 422
    pod = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    patched = strategic_merge(
        pod,
        {"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "a", "$patch": "delete"}]}},
    )
    assert patched == {"spec": {"containers": [{"name": "b", "image": "2"}]}}


def test_label_and_field_selectors() -> None:
    obj = {"metadata": {"name": "n1", "namespace": "default", "labels": {"a": "1", "b": "x"}}}
    assert label_selector("a=1,b in (x, y)")(obj)
    assert label_selector("!c,a")(obj)
    assert not label_selector("a!=1")(obj)
    assert not label_selector("b notin (x)")(obj)
    assert field_selector("metadata.name=n1", "pods")(obj)
    assert not field_selector("metadata.name!=n1", "pods")(obj)
    with pytest.raises(KubeError) as bad:
        field_selector("spec.foo=1", "configmaps")
    assert bad.value.code == 400
    assert '"spec.foo" is not a known field selector' in bad.value.message


def test_status_bodies_are_metav1_status() -> None:
    assert JOBSETS is not None
    body = not_found(JOBSETS, "x").body()
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'jobsets.jobset.x-k8s.io "x" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "x", "kind": "jobsets", "group": "jobset.x-k8s.io"},
    }


def test_admission_defaults_prunes_and_refuses_as_the_server_does() -> None:
    assert CQ_V1BETA2 is not None
    stored, warnings = admit(CQ_V1BETA2, _queue(), "Strict")
    assert stored["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert warnings == []
    typo = _queue()
    typo["spec"]["cohort"] = "x"  # v1beta1's name; v1beta2 calls it cohortName
    with pytest.raises(KubeError) as strict:
        admit(CQ_V1BETA2, typo, "Strict")
    assert strict.value.code == 400
    assert strict.value.message.endswith('strict decoding error: unknown field "spec.cohort"')
    kept, warned = admit(CQ_V1BETA2, typo, "Warn")
    assert warned == ['unknown field "spec.cohort"']
    assert "cohort" not in kept["spec"]
    wrong = _queue()
    wrong["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = [1]
    with pytest.raises(KubeError) as invalid:
        admit(CQ_V1BETA2, wrong, "Strict")
    assert invalid.value.code == 422
    assert invalid.value.reason == "Invalid"
    assert invalid.value.message.startswith('ClusterQueue.kueue.x-k8s.io "cq" is invalid: ')


def test_generation_moves_only_when_the_spec_changes(tmp_path: Path) -> None:
    assert CQ_V1BETA2 is not None and CONFIGMAPS is not None
    state_path = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    with transaction(state_path) as state:
        created = store.create(state, CQ_V1BETA2, "", admit(CQ_V1BETA2, _queue(), "")[0])
        version = created["metadata"]["resourceVersion"]
        same = store.replace(state, CQ_V1BETA2, "", "cq", store.stored(state, CQ_V1BETA2, "", "cq"))
        assert same["metadata"]["resourceVersion"] == version
        labelled = store.stored(state, CQ_V1BETA2, "", "cq")
        labelled["metadata"]["labels"] = {"a": "b"}
        relabelled = store.replace(state, CQ_V1BETA2, "", "cq", labelled)
        assert relabelled["metadata"]["generation"] == 1
        assert relabelled["metadata"]["resourceVersion"] != version
        bigger = store.stored(state, CQ_V1BETA2, "", "cq")
        bigger["spec"] = _queue(16)["spec"]
        assert store.replace(state, CQ_V1BETA2, "", "cq", bigger)["metadata"]["generation"] == 2
        stale = store.stored(state, CQ_V1BETA2, "", "cq")
        stale["metadata"]["resourceVersion"] = version
        with pytest.raises(KubeError) as conflict:
            store.replace(state, CQ_V1BETA2, "", "cq", stale)
        assert conflict.value.reason == "Conflict"
        with pytest.raises(KubeError) as exists:
            store.create(state, CQ_V1BETA2, "", _queue())
        assert exists.value.body()["message"] == 'clusterqueues.kueue.x-k8s.io "cq" already exists'
        with pytest.raises(KubeError) as no_namespace:
            store.create(state, CONFIGMAPS, "nowhere", {"metadata": {"name": "m"}})
        assert no_namespace.value.message == 'namespaces "nowhere" not found'
        v1beta1 = find("kueue.x-k8s.io", "v1beta1", "clusterqueues")
        assert v1beta1 is not None
        assert store.get(state, v1beta1, "", "cq")["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert "ClusterQueue//cq" in read_state(state_path)["k8s"]  # where Kueue's admission reads it


def test_nodes_follow_the_pools() -> None:
    state = {
        "cluster": {"name": "c"},
        "region": "us-central1",
        "resource_policies": {},
        "node_pools": {},
    }
    state["node_pools"] = {
        p["name"]: {**p, "status": p.get("status", "RUNNING"), "labels": {}, "version": "1.34"}
        for p in SCENARIO["node_pools"]
    }
    found = nodes(state, "2026-11-22T06:00:00Z")
    assert len(found) == 2  # the ERROR pool has no VMs
    labels = found[0]["metadata"]["labels"]
    assert labels["cloud.google.com/gke-nodepool"] == "np"
    assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert labels["cloud.google.com/gke-tpu-topology"] == "2x4"
    assert found[0]["status"]["capacity"]["google.com/tpu"] == "4"


def test_discovery_prefers_kueue_v1beta2_and_serves_v1beta1() -> None:
    groups = {g["name"]: g for g in discovery.group_list()["groups"]}
    kueue = groups["kueue.x-k8s.io"]
    assert kueue["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in kueue["versions"]] == ["v1beta2", "v1beta1"]
    assert groups["jobset.x-k8s.io"]["preferredVersion"]["version"] == "v1alpha2"
    assert groups["ray.io"]["preferredVersion"]["version"] == "v1"
    core = discovery.resource_list("", "v1")
    assert core is not None
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["namespaced"] is True
    assert "pods/log" in [r["name"] for r in core["resources"]]
    cq = discovery.resource_list("kueue.x-k8s.io", "v1beta1")
    assert cq is not None
    assert next(r for r in cq["resources"] if r["name"] == "clusterqueues")["shortNames"] == ["cq"]
    assert discovery.resource_list("kueue.x-k8s.io", "v9") is None


def test_openapi_v3_says_the_server_validates_fields() -> None:
    index = openapi_v3([])
    assert index is not None
    assert "apis/jobset.x-k8s.io/v1alpha2" in index["paths"]
    doc = openapi_v3(["apis", "jobset.x-k8s.io", "v1alpha2"])
    assert doc is not None
    patch = doc["paths"]["/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}"][
        "patch"
    ]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "JobSet"
    assert openapi_v3(["apis", "nothing", "v1"]) is None


def test_paths_name_resources() -> None:
    target = parse_target(
        ["jobset.x-k8s.io", "v1alpha2", "namespaces", "ns", "jobsets", "x", "status"]
    )
    assert target is not None
    assert (target.namespace, target.name, target.subresource) == ("ns", "x", "status")
    namespace = parse_target(["v1", "namespaces", "ns"])
    assert namespace is not None and namespace.resource.plural == "namespaces"
    assert namespace.name == "ns"
    assert parse_target(["v1", "widgets"]) is None


def test_a_test_kubeconfig_points_at_the_server_with_its_ca_and_a_token_user(
    tmp_path: Path,
) -> None:
    path = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1234", "gke_p_r_c", ca_data="Q0E=")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "gke_p_r_c"
    cluster = config["clusters"][0]["cluster"]
    assert cluster == {"server": "https://127.0.0.1:1234", "certificate-authority-data": "Q0E="}
    assert config["users"][0]["user"] == {"token": TOKEN}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_dry_run_changes_nothing_and_watch_reports_changes(tmp_path: Path) -> None:
    assert CONFIGMAPS is not None
    state_path = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    target = Target(CONFIGMAPS, "default")
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}})
    dry = KubeApi(state_path).handle("POST", target, {"dryRun": "All"}, body.encode(), {})
    assert dry.code == 201
    assert "ConfigMap/default/m" not in read_state(state_path)["k8s"]
    polls = iter([True, True])
    events = watch_events(state_path, target, {}, False, lambda: next(polls, False))
    KubeApi(state_path).handle("POST", target, {}, body.encode(), {})  # after the first read
    first = json.loads(next(events))
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "m")
    KubeApi(state_path).handle("DELETE", Target(CONFIGMAPS, "default", "m"), {}, b"", {})
    assert [json.loads(line)["type"] for line in events] == ["DELETED"]


def test_kueue_versions_convert_through_the_storage_version(tmp_path: Path) -> None:
    old = find("kueue.x-k8s.io", "v1beta1", "clusterqueues")
    assert old is not None and CQ_V1BETA2 is not None
    state_path = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    queue = {**_queue(), "apiVersion": "kueue.x-k8s.io/v1beta1"}
    queue["spec"] = {**queue["spec"], "cohort": "team", "admissionChecks": ["prov"]}
    with transaction(state_path) as state:
        store.create(state, old, "", admit(old, queue, "Strict")[0])
        kept = state["k8s"]["ClusterQueue//cq"]
        assert kept["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        current = store.get(state, CQ_V1BETA2, "", "cq")["spec"]
        assert current["cohortName"] == "team" and "cohort" not in current
        assert current["admissionChecksStrategy"] == {"admissionChecks": [{"name": "prov"}]}
        assert store.get(state, old, "", "cq")["spec"]["cohort"] == "team"
        assert admit(CQ_V1BETA2, store.get(state, CQ_V1BETA2, "", "cq"), "Strict")[1] == []


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (sizes below 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_protobuf_configmap_bodies_decode_as_kubectl_meant_them() -> None:
    meta = _field(1, b"settings") + _field(11, _field(1, b"app") + _field(2, b"train"))
    configmap = _field(1, meta) + _field(2, _field(1, b"tpu7x-256") + _field(2, b"32"))
    unknown = _field(1, _field(1, b"v1") + _field(2, b"ConfigMap")) + _field(2, configmap)
    decoded = protobuf.decode(protobuf.MAGIC + unknown, "application/vnd.kubernetes.protobuf")
    assert decoded == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"app": "train"}},
        "data": {"tpu7x-256": "32"},
    }
    pod = _field(1, _field(1, b"v1") + _field(2, b"Pod")) + _field(2, b"")
    with pytest.raises(KubeError) as refused:
        protobuf.decode(protobuf.MAGIC + pod, "application/vnd.kubernetes.protobuf")
    assert refused.value.code == 415
    assert "Pod is not decoded from protobuf" in refused.value.message
