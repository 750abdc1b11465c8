"""What the GKE path asks of xpk: ``cluster adapt`` only where Kueue lacks what the slice needs
(once a run, with the project's number and without xpk's tool check), a failed adapt that the
run gets over with gcloud, the submit script's environment, and the workload deleted as xpk
deletes it. xpk, gcloud and kubectl are played by a scripted runner."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from test_gcloud_call_budget import Cloud
from test_provision_failures import _provisioner
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.infra.xpk import SKIP_VALIDATION, Xpk, cluster_adapt_argv
from tpu_trainer.launchers.gke.kueue import (
    cluster_queue,
    configmap_name,
    local_queue,
    resource_flavor,
)
from tpu_trainer.launchers.gke.submitter import (
    GclusterSubmitter,
    Target,
    XpkSubmitter,
)
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

SLICE = Slice.parse("tpu7x-4x4x4")
NOT_FOUND = 'Error from server (NotFound): resourceflavors.kueue.x-k8s.io "x" not found'


class Cluster(Cloud):
    """gcloud for a failover (``Cloud``), kubectl reading Kueue as it is, xpk's adapt exit."""

    def __init__(self, *, kueue_ready: bool, adapt_code: int = 0) -> None:
        super().__init__()
        self.adapt_code = adapt_code
        data = dict([SLICE.configmap_entry(1)])
        self.objects: dict[str, dict[str, Any]] = (
            {
                "resourceflavor": resource_flavor(SLICE, 1),
                "clusterqueue": cluster_queue(SLICE, 1),
                "localqueue": local_queue(),
                "configmap": {"metadata": {"name": configmap_name("demo-cluster")}, "data": data},
            }
            if kueue_ready
            else {}
        )

    def run(self, argv: Sequence[str], **options: object) -> CommandResult:
        if argv[0] == "kubectl":
            self.argvs.append(list(argv))
            found = self.objects.get(argv[2])
            if found is None:
                return CommandResult(tuple(argv), 1, "", NOT_FOUND, 0.0)
            return CommandResult(tuple(argv), 0, json.dumps(found), "", 0.0)
        if argv[0] == "xpk":
            self.argvs.append(list(argv))
            tail = "[XPK] XPK failed, error code 1\n" if self.adapt_code else ""
            return CommandResult(tuple(argv), self.adapt_code, tail, "", 0.0)
        return super().run(argv, **options)


def _adapts(cluster: Cluster) -> list[list[str]]:
    return [a for a in cluster.argvs if a[:3] == ["xpk", "cluster", "adapt"]]


def test_adapt_is_not_run_where_kueue_already_serves_the_slice(tmp_path: Path) -> None:
    cluster = Cluster(kueue_ready=True)
    prov = _provisioner(tmp_path, cluster)  # type: ignore[arg-type]
    prov.slice = SLICE
    made = prov._create([], "1.34.1-gke.1829001")
    assert made.zone == "us-central1-c"
    assert _adapts(cluster) == []
    assert prov.kueue_ready  # the configure stage need not read Kueue again
    assert sum(1 for a in cluster.argvs if a[0] == "kubectl") == 4  # read once, not per attempt
    shown = prov.display.messages  # type: ignore[attr-defined]
    assert any(
        "Kueue already serves 1xtpu7x-128: xpk cluster adapt is not needed" in m for m in shown
    )


@pytest.mark.parametrize("code", [0, 1])
def test_adapt_runs_once_a_run_with_the_number_and_its_failure_is_got_over(
    tmp_path: Path, code: int
) -> None:
    cluster = Cluster(kueue_ready=False, adapt_code=code)
    prov = _provisioner(tmp_path, cluster)  # type: ignore[arg-type]
    prov.slice, prov.project_number = SLICE, "123456789012"
    made = prov._create([], "1.34.1-gke.1829001")
    # the first reservation was exhausted after adapt: the second goes straight to gcloud
    assert made.zone == "us-central1-c" and [a.outcome for a in prov.attempts][-1] == "created"
    (adapt,) = _adapts(cluster)
    assert "--project-number=123456789012" in adapt and adapt[-1] == SKIP_VALIDATION
    assert not prov.kueue_ready
    shown = " ".join(prov.display.messages)  # type: ignore[attr-defined]
    failed = "xpk cluster adapt failed (exit 1: [XPK] XPK failed, error code 1)"
    assert (failed in shown) is bool(code)


def test_the_adapt_line_is_one_xpk_accepts_without_a_number_too() -> None:
    argv = cluster_adapt_argv(
        cluster="c", project="p", zone="z", device_type="v6e-8", num_slices=1, reservation="r"
    )
    assert not [a for a in argv if a.startswith("--project-number")]
    assert argv[-1] == SKIP_VALIDATION


def test_the_submit_script_gets_the_tools_xpk_and_the_number() -> None:
    xpk = Xpk(Cluster(kueue_ready=True), search_path=lambda: "/cache/xpk-1.16.0/bin:/usr/bin")
    env = XpkSubmitter(xpk.runner, xpk=xpk).script_env("123456789012")
    assert env["PATH"].startswith("/cache/xpk-1.16.0/bin:")
    assert env["PROJECT_NUMBER"] == "123456789012"
    assert XpkSubmitter(xpk.runner, xpk=xpk).script_env(None)["PROJECT_NUMBER"] == ""
    assert GclusterSubmitter(xpk.runner).script_env("1") == {}


def test_an_xpk_workload_is_deleted_as_xpk_workload_delete_deletes_it() -> None:
    cluster = Cluster(kueue_ready=True)
    target = Target(workload="w", cluster="demo-cluster", project="p", zone="us-central1-c")
    XpkSubmitter(cluster).cancel(target)
    assert cluster.argvs == [["kubectl", "delete", "jobset", "w", "--namespace=default"]]


def test_the_jobsets_ending_once_read_is_not_asked_for_again(tmp_path: Path) -> None:
    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.infra.kubectl import Kubectl
    from tpu_trainer.launchers.gke.follow import KUEUE_WORKLOADS, Follower

    done = {"status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    cluster = Cluster(kueue_ready=True)
    cluster.objects["jobset"] = done
    follower = Follower(
        Kubectl(cluster),
        cluster,
        SilentDisplay(),
        "w",
        expected_pods=1,
        log_path=tmp_path / "w.log",
        on_line=lambda _line: None,
    )
    assert follower.ending() is not None and follower.ending() is not None
    assert [a[1:3] for a in cluster.argvs] == [["get", "jobset"]]
    # resource.version.group: kubectl finds it in its discovery cache (no refetch per call)
    assert KUEUE_WORKLOADS.split(".")[:2] == ["workloads", "v1beta2"]
