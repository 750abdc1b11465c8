"""Every gcloud command line the tool builds is one gcloud's own parser accepts.

Where each line comes from:

- ``infra/gcloud.py`` (the ``Gcloud`` client): ``auth list``; clusters list/describe; node
  pools list/describe/delete (teardown, cleanup, gc and a failed create's own pool); beta
  reservations describe (a zone configured) and list (none); resource policies
  describe/create workload-policy/delete (teardown of the workload policy);
- ``infra/kube_access.py``: ``container clusters get-credentials``, before the tool's first
  kubectl command;
- ``launchers/gke/nodepool.py`` ``gcloud_create_argv``: the node-pool create of provisioning,
  single- and multi-host, one per slice, for every TPU family GKE has;
- ``launchers/gke/preflight.py``: the workload-policy command ``preflight --fix`` runs and the
  node-pool commands its fix text gives;
- ``plan/scripts.py`` ``render_setup``: ``container clusters get-credentials`` and ``auth
  configure-docker``, as bash runs them from ``setup_training_env.sh``;
- ``launchers/tpu_vm/spec.py``: tpu-vm create (every provisioning, direct and queued),
  describe, delete, queued-resources describe/delete, ssh (with ``--command`` and the
  variables it sends) and scp;
- ``infra/gcloud_errors.py`` ``FIXES``: the commands a failed create tells the user to run.

The delete that provisioning's warning about a pool in ERROR names is the client's node-pool
delete without ``--project``; the lines xpk runs itself are xpk's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from conftest import CONFIG, RECIPES, plan_for
from test_scripts import _run_setup
from tpu_trainer.config.load import read_config
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.gcloud_errors import FIXES
from tpu_trainer.infra.gcloud_parser import check_gcloud_argvs
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.gke.nodepool import NodePoolRequest, gcloud_create_argv, tool_pool_name
from tpu_trainer.launchers.gke.preflight import Observed, checks
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
    KubeAccess("p", "us-central1", "c").ensure(rec)
    return rec.argvs


def _pool_argvs() -> list[list[str]]:
    out = []
    for name, machine, slices in [
        ("tpu7x-4x4x8", "tpu7x-standard-4t", 1), ("tpu7x-4x4x8", "tpu7x-ultranet-4t", 2),
        ("tpu7x-2x2x1", "tpu7x-standard-4t", 1), ("v5p-16", "ct5p-hightpu-4t", 1),
        ("v5litepod-16", "ct5lp-hightpu-4t", 1), ("v6e-8", "ct6e-standard-8t", 1),
        ("v6e-16", "ct6e-standard-4t", 2), ("v4-16", "ct4p-hightpu-4t", 1),
    ]:  # fmt: skip
        s = Slice.parse(name)
        for index in range(slices):
            out.append(gcloud_create_argv(NodePoolRequest(
                name=tool_pool_name("12345678abcd", s, index, slices), cluster="c", project="p",
                region="us-central1", zone="us-central1-a", reservation="r", slice=s,
                node_version="1.33.5-gke.1000000", machine_type=machine)))  # fmt: skip
    return out


def _preflight_argvs() -> list[list[str]]:
    """``preflight`` against a cluster with nothing ready: the policy fix it runs, and the
    node-pool creates its fix text names (joined with ``&&``)."""
    out: list[list[str]] = []
    for slices in (1, 2):
        plan = plan_for(RECIPES["storage"], num_slices=slices)
        nothing = Observed(None, [], False, None, None, None)
        for check in checks(plan, read_config(CONFIG), nothing):
            if check.fix_argv[:1] == ("gcloud",):
                out.append(list(check.fix_argv))
            _, _, by_hand = check.fix.partition("by hand: ")
            out += [shlex.split(c) for c in by_hand.split(" && ") if c.startswith("gcloud ")]
    return out


def _fix_text_argvs() -> list[list[str]]:
    return [shlex.split(c) for fix in FIXES.values() for c in re.findall(r"`(gcloud [^`]+)`", fix)]


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


def _setup_argvs(tmp_path: Path, fake_bin: Path) -> list[list[str]]:
    calls = _run_setup(plan_for(RECIPES["classic"]), tmp_path, fake_bin, image_exists=False)
    return [c for c in calls if c[0] == "gcloud"]


def test_every_gcloud_line_the_tool_builds_passes_gclouds_parser(
    tmp_path: Path, fake_bin: Path
) -> None:
    sources = {
        "client": _client_argvs(),
        "node-pool create": _pool_argvs(),
        "preflight": _preflight_argvs(),
        "setup script": _setup_argvs(tmp_path, fake_bin),
        "tpu vm": _vm_argvs(tmp_path),
        "fix texts": _fix_text_argvs(),
    }
    assert {k: len(v) for k, v in sources.items()} == {
        "client": 12, "node-pool create": 10, "preflight": 5, "setup script": 2, "tpu vm": 12,
        "fix texts": 2,
    }  # fmt: skip
    argvs = [a for lines in sources.values() for a in lines]
    assert all(a[0] == "gcloud" for a in argvs)
    verbs = {" ".join(a[1:5]) for a in argvs}
    for expected in ("container clusters get-credentials demo-cluster",
                     "beta compute resource-policies create", "compute tpus queued-resources create",
                     "compute tpus tpu-vm ssh"):  # fmt: skip
        assert any(v.startswith(expected) for v in verbs), expected
    parsed = check_gcloud_argvs(argvs)
    refused = [f"{' '.join(p.argv)}\n  {p.error}" for p in parsed if not p.ok]
    assert refused == [], "\n".join(refused)
    assert len(parsed) == len(argvs)


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
