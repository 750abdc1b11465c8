"""Every gcloud command line the tool builds is one gcloud's own parser accepts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.gcloud_parser import check_gcloud_argvs
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.gke.nodepool import NodePoolRequest, gcloud_create_argv
from tpu_trainer.launchers.tpu_vm import spec as vm
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.e2e


class Recorder:
    """A runner that answers every command with success and remembers the argv."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **_options: object) -> CommandResult:
        self.argvs.append(list(argv))
        if "describe" in argv:
            return CommandResult(tuple(argv), 1, "", "ERROR: NOT_FOUND: not found", 0.0)
        return CommandResult(tuple(argv), 0, "[]" if "list" in argv else "", "", 0.0)


def _client_argvs() -> list[list[str]]:
    rec = Recorder()
    g = Gcloud(runner=rec, project="p")
    g.active_account()
    g.cluster_names("us-central1")
    g.cluster("c", "us-central1")
    g.node_pools("c", "us-central1")
    g.node_pool("c", "us-central1", "np")
    g.delete_node_pool("c", "us-central1", "np")
    g.reservation("r", "us-central1-a")
    g.reservation("r", None)
    g.resource_policy_exists("wp", "us-central1")
    g.create_workload_policy("wp", "us-central1", "4x4x4")
    g.delete_resource_policy("wp", "us-central1")
    return rec.argvs


def _pool_argvs() -> list[list[str]]:
    out = []
    for name, machine in [("tpu7x-4x4x8", "tpu7x-standard-4t"), ("v5p-16", "ct5p-hightpu-4t"),
                          ("v6e-8", "ct6e-standard-8t"), ("v6e-16", "ct6e-standard-4t")]:  # fmt: skip
        out.append(gcloud_create_argv(NodePoolRequest(
            name="tpt-12345678-x", cluster="c", project="p", region="us-central1",
            zone="us-central1-a", reservation="r", slice=Slice.parse(name),
            node_version="1.33.5-gke.1000000", machine_type=machine)))  # fmt: skip
    return out


def _vm_argvs(out_dir: Path) -> list[list[str]]:
    out = []
    for provisioning in vm.Provisioning:
        for queued in (False, True):
            spec = vm.tpu_vm_spec(run_id="12345678abcd", model="llama", project="p",
                                  zone="us-central1-a", slice=Slice.parse("v5litepod-16"),
                                  provisioning=provisioning, queued=queued)  # fmt: skip
            out.append(vm.create_argv(spec))
    out += [
        vm.describe_argv("vm", "z", "p"), vm.queued_describe_argv("qr", "z", "p"),
        vm.delete_argv("vm", "z", "p"), vm.queued_delete_argv("qr", "z", "p"),
        vm.ssh_argv(spec, "python3 -c pass", str(out_dir), send_env=("HF_TOKEN",)),
        vm.scp_argv(spec, ["a.py", "b.yaml"], "job"),
    ]  # fmt: skip
    return out


def test_every_gcloud_line_the_tool_builds_passes_gclouds_parser(tmp_path: Path) -> None:
    argvs = _client_argvs() + _pool_argvs() + _vm_argvs(tmp_path)
    assert all(a[0] == "gcloud" for a in argvs)
    parsed = check_gcloud_argvs(argvs)
    refused = [f"{' '.join(p.argv)}\n  {p.error}" for p in parsed if not p.ok]
    assert refused == [], "\n".join(refused)
    assert len(parsed) == len(argvs) >= 25


def test_the_parser_check_refuses_what_gcloud_refuses() -> None:
    parsed = check_gcloud_argvs([
        ["gcloud", "container", "node-pools", "list", "--cluster=c", "--bogus", "--project=p"],
        ["gcloud", "compute", "tpus", "tpu-vm", "create", "vm", "--zone=z", "--version=v",
         "--accelerator-type=v5litepod-8", "--worker=all", "--project=p"],
        ["gcloud", "compute", "tpus", "tpu-vm", "create", "vm", "--zone=z", "--version=v",
         "--accelerator-type=v5litepod-8", "--preemptible", "--project=p"],
    ])  # fmt: skip
    assert [p.ok for p in parsed] == [False, False, True]
    assert "unrecognized arguments: --bogus" in parsed[0].error
    assert "unrecognized arguments: --worker=all" in parsed[1].error
