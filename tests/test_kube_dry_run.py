"""The tool's check before every apply, ``kubectl apply --dry-run=server``, through the real
kubectl against the Kubernetes API emulator (HTTPS with the cluster's CA, a bearer token): the
server admits without persisting (``dryRun=All``), and what it refuses reaches the user as the
object, its field and what to do, with nothing applied."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import read_state
from tpu_trainer.infra.kube_check import ClusterRefusedError, Refusal
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.launchers.gke.kueue_setup import check_fixes
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.gcloud_env import TOKEN
from tpu_trainer.simcloud.kube.kubeconfig import context_name, write_kubeconfig
from tpu_trainer.simcloud.kube.pki import server_pki
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

SLICE = Slice.parse("tpu7x-4x4x8")


@dataclass
class Cluster:
    server: KubeServer
    kubectl: Kubectl

    def stored(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        key = f"{kind}/{namespace}/{name}"
        found = read_state(self.server.state_path)["k8s"].get(key)
        return None if found is None else dict(found)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    binary = shutil.which("kubectl") or shutil.which("kubectl", path="/usr/bin")
    if binary is None:
        pytest.fail(
            "kubectl is not installed: install kubectl 1.32 or `gcloud components install kubectl`"
        )
    scenario = {
        "project": "demo-project",
        "region": "us-central1",
        "cluster": {"name": "demo-cluster"},
    }
    state = init_state(parse_scenario(scenario), tmp_path / "state.json")
    pki = server_pki(tmp_path / "pki", "demo-cluster")
    with KubeServer(state, idle_seconds=120, pki=pki, token=TOKEN) as server:
        config = write_kubeconfig(
            tmp_path / "kubeconfig",
            server.base_url,
            context_name("demo-project", "us-central1", "demo-cluster"),
            ca_data=pki.ca_data,
        )
        env = {"KUBECONFIG": str(config), "HOME": str(tmp_path), "PATH": str(Path(binary).parent)}
        yield Cluster(server, Kubectl(SubprocessRunner(env=env)))


def test_a_valid_batch_is_admitted_and_nothing_is_kept(cluster: Cluster) -> None:
    objects = [kueue.resource_flavor(SLICE, 1), kueue.cluster_queue(SLICE, 1), kueue.local_queue()]
    cluster.kubectl.check(objects)
    assert read_state(cluster.server.state_path)["k8s"] == {}
    checks = [r for r in cluster.server.requests if "dryRun=All" in r[1]]
    assert [code for *_, code in checks] == [201, 201, 201]


def test_a_dry_run_of_a_changed_object_leaves_the_stored_one_as_it_was(cluster: Cluster) -> None:
    flavor = kueue.resource_flavor(SLICE, 1)
    assert cluster.kubectl.apply(flavor).ok
    before = cluster.stored("ResourceFlavor", flavor["metadata"]["name"])
    assert before is not None
    changed = copy.deepcopy(flavor)
    changed["spec"]["nodeLabels"]["team"] = "llm"
    cluster.kubectl.check([changed])
    after = cluster.stored("ResourceFlavor", flavor["metadata"]["name"])
    assert after == before
    patched = [r for r in cluster.server.requests if r[0] == "PATCH" and "dryRun=All" in r[1]]
    assert [code for *_, code in patched] == [200]


def test_a_refused_object_is_named_with_its_fields_and_its_batch_is_not_applied(
    cluster: Cluster,
) -> None:
    queue = kueue.cluster_queue(SLICE, 1)
    queue["spec"]["queueingStrategy"] = "Fastest"
    local = kueue.local_queue()
    local["spec"]["priority"] = 1
    findings = [
        kueue.Finding(
            "ResourceFlavor",
            "missing",
            ("kubectl", "apply", "-f", "-"),
            kueue.resource_flavor(SLICE, 1),
        ),
        kueue.Finding("ClusterQueue", "missing", ("kubectl", "apply", "-f", "-"), queue),
        kueue.Finding("LocalQueue", "missing", ("kubectl", "apply", "-f", "-"), local),
    ]
    with pytest.raises(ClusterRefusedError) as refused:
        check_fixes(findings, cluster.kubectl)
    by_subject = {r.subject: r for r in refused.value.rejections}
    assert set(by_subject) == {"ClusterQueue cluster-queue", "LocalQueue multislice-queue"}
    invalid = by_subject["ClusterQueue cluster-queue"]
    assert (invalid.refusal, invalid.fields) == (Refusal.INVALID, "spec.queueingStrategy")
    assert "'Fastest' is not one of ['StrictFIFO', 'BestEffortFIFO']" in invalid.problems[0]
    unknown = by_subject["LocalQueue multislice-queue"]
    assert (unknown.refusal, unknown.fields) == (Refusal.UNKNOWN_FIELD, "spec.priority")
    message = refused.value.message
    assert message.startswith("the cluster refused ClusterQueue cluster-queue, LocalQueue")
    assert "nothing was applied" in message
    assert "correct spec.queueingStrategy" in refused.value.fix
    assert read_state(cluster.server.state_path)["k8s"] == {}  # the valid flavor neither


def test_a_label_that_reads_as_a_number_in_yaml_1_2_reaches_kubectl_as_a_string(
    cluster: Cluster,
) -> None:
    flavor = kueue.resource_flavor(SLICE, 1)
    flavor["metadata"]["labels"] = {"run": "60368e75", "step": "1e5", "hex": "0x1f"}
    cluster.kubectl.check([flavor])
    checks = [r for r in cluster.server.requests if "dryRun=All" in r[1]]
    assert [code for *_, code in checks] == [201]
