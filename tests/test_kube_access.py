"""kubectl's credentials for the configured cluster (``infra.kube_access``): ``gcloud container
clusters get-credentials`` once per process, before the tool's first kubectl command, and a
clear error when it cannot be had."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from tpu_trainer.app.services import Services
from tpu_trainer.infra.kube_access import ClusterAccessError, KubeAccess
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import LOGIN_FIX, CommandFailed, CommandResult, DryRunRunner

pytestmark = pytest.mark.unit

GET_CREDENTIALS = [
    "gcloud",
    "container",
    "clusters",
    "get-credentials",
    "demo-cluster",
    "--location=us-central1",
    "--project=demo-project",
]
PLUGIN_WARNING = (
    "CRITICAL: ACTION REQUIRED: gke-gcloud-auth-plugin, which is needed for continued use of "
    "kubectl, was not found or is not executable. Install gke-gcloud-auth-plugin for use with "
    "kubectl by following https://cloud.google.com/kubernetes-engine/docs/how-to/"
    "cluster-access-for-kubectl#install_plugin\n"
    "kubeconfig entry generated for demo-cluster.\n"
)


class Runner:
    def __init__(self, code: int = 0, stderr: str = "", delay: float = 0.0) -> None:
        self.code, self.stderr, self.delay = code, stderr, delay
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **_options: Any) -> CommandResult:
        self.argvs.append(list(argv))
        time.sleep(self.delay)
        code = self.code if argv[0] == "gcloud" else 0
        return CommandResult(tuple(argv), code, '{"items": []}', self.stderr, 0.0)


def access() -> KubeAccess:
    return KubeAccess("demo-project", "us-central1", "demo-cluster")


def test_credentials_come_first_and_once_however_many_kubectl_commands_follow() -> None:
    runner = Runner()
    kubectl = Kubectl(runner, access=access())
    kubectl.get("clusterqueue", "cluster-queue")
    kubectl.list_objects("pods", selector="a=b")
    context = "--context=gke_demo-project_us-central1_demo-cluster"
    assert kubectl.argv("logs", "p") == ["kubectl", context, "logs", "p"]
    assert runner.argvs[0] == GET_CREDENTIALS
    assert [a[0] for a in runner.argvs] == ["gcloud", "kubectl", "kubectl"]


def test_threads_asking_at_once_wait_for_the_one_fetch() -> None:
    runner = Runner(delay=0.05)
    kubectl = Kubectl(runner, access=access())
    threads = [threading.Thread(target=kubectl.get, args=("cq", "x")) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a[0] for a in runner.argvs].count("gcloud") == 1
    assert runner.argvs[0] == GET_CREDENTIALS


def test_services_share_one_access_between_the_kubectls_they_hand_out() -> None:
    runner = Runner()
    svc = Services(runner, store=None, display=None, project="demo-project", kube_access=access())  # type: ignore[arg-type]
    svc.kubectl.get("cq", "a")
    svc.kubectl.get("cq", "b")
    assert [a[0] for a in runner.argvs] == ["gcloud", "kubectl", "kubectl"]


def test_a_failed_fetch_names_the_configuration_and_a_later_command_tries_again() -> None:
    missing = "ERROR: (gcloud.container.clusters.get-credentials) ResponseError: code=404, message=Not found: projects/demo-project/locations/us-central1/clusters/demo-cluster.\n"
    runner = Runner(code=1, stderr=missing)
    kubectl = Kubectl(runner, access=access())
    with pytest.raises(CommandFailed) as failed:
        kubectl.get("cq", "a")
    assert "code=404" in failed.value.message
    assert "check cluster_name, region and project_id" in failed.value.fix
    assert "gcloud container clusters list --project=demo-project" in failed.value.fix
    with pytest.raises(CommandFailed):
        kubectl.get("cq", "a")
    assert [a[0] for a in runner.argvs] == ["gcloud", "gcloud"]  # no kubectl ran


def test_not_logged_in_says_to_log_in() -> None:
    runner = Runner(
        code=1,
        stderr="ERROR: (gcloud.container.clusters.get-credentials) You do not currently have an active account selected.\n",
    )
    with pytest.raises(CommandFailed) as failed:
        access().ensure(runner)
    assert failed.value.fix == LOGIN_FIX


def test_a_missing_auth_plugin_stops_before_kubectl_fails_obscurely() -> None:
    runner = Runner(stderr=PLUGIN_WARNING)
    with pytest.raises(ClusterAccessError) as missing:
        Kubectl(runner, access=access()).get("cq", "a")
    assert "gke-gcloud-auth-plugin is not installed" in missing.value.message
    assert "gcloud components install gke-gcloud-auth-plugin" in missing.value.fix
    assert [a[0] for a in runner.argvs] == ["gcloud"]


def test_a_dry_run_fetches_credentials_too_it_changes_nothing_in_the_cloud() -> None:
    inner = Runner()
    printed: list[tuple[str, ...]] = []
    Kubectl(DryRunRunner(inner, on_record=printed.append), access=access()).get("cq", "a")
    assert inner.argvs[0] == GET_CREDENTIALS and printed == []
    assert access().context == "gke_demo-project_us-central1_demo-cluster"
