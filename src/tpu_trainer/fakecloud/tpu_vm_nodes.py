"""The TPU VMs in the state file, as the local worker stand-in (``tpu-vm ssh``/``scp``) reads
them: the part of the state a scenario starts from, and finding one node.

The emulated Cloud TPU API (``simcloud.tpu``) owns the nodes' API side (``state``,
``accelerator_type``, ``runtime_version``, ``workers``...); the stand-in adds what happens on the
workers (``files``, ``venvs``, ``accept_env``, ``env_seen``, and the ``program`` the train command
started: :mod:`tpu_trainer.fakecloud.tpu_vm_program`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpu_trainer.errors import TopologyError
from tpu_trainer.fakecloud.gcloud_cli import Ctx
from tpu_trainer.fakecloud.state import FAKE_NOW, State
from tpu_trainer.plan.slices import Slice

if TYPE_CHECKING:  # the fake tools never load a scenario: keep them quick to start
    from tpu_trainer.fakecloud.scenario import Scenario

BASE_IMAGE = "tpu-ubuntu2204-base"
_WORKER_SIDE: dict[str, Any] = {
    "files": {},
    "venvs": [],
    "accept_env": [],
    "env_seen": [],
    "program": None,
}


def initial_tpu_vms(scenario: Scenario) -> dict[str, Any]:
    """The ``tpu_vm`` part of the state: behaviour, nodes (the scenario's existing VMs),
    queued resources, operations and the scenario clock."""
    tv = scenario.tpu_vm
    zones = list(tv.zones) or [f"{scenario.region}-{z}" for z in "abc"]

    def script(s: Any) -> dict[str, Any]:
        return {
            "log": s.log,
            "other_workers_log": s.other_workers_log,
            "exit_code": s.exit_code,
            "failing_worker": s.failing_worker,
            "failing_exit_code": s.failing_exit_code,
            "failing_log": s.failing_log,
        }

    behaviour = {
        "zones": zones,
        "creating_polls": tv.creating_polls,
        "queued_polls": tv.queued_polls,
        "capacity": tv.capacity,
        "preempt_spot_after": tv.preempt_spot_after,
        "install": script(tv.install),
        "devices": {str(k): v for k, v in tv.devices.items()},
        "train": {
            **script(tv.train.script),
            "hang": tv.train.hang,
            "echo_env": list(tv.train.echo_env),
            "preempt_after_step": tv.train.preempt_after_step,
            "line_seconds": tv.train.line_seconds,
        },
    }
    nodes: dict[str, dict[str, Any]] = {
        vm.name: {
            "name": vm.name,
            "zone": vm.zone,
            "project": scenario.project,
            "accelerator_type": vm.accelerator_type,
            "runtime_version": vm.runtime_version,
            "state": vm.state,
            "workers": [],
            "queued_resource": None,
            "id": str(7_100_000_000_000_000_000 + i),
            "seq": i,
            "create_time": FAKE_NOW,
        }
        for i, vm in enumerate(tv.existing, start=1)
    }
    return {
        "tpu_vm": {
            "behaviour": behaviour,
            "nodes": nodes,
            "queued": {},
            "operations": {},
            "clock": 0.0,
            "seq": len(nodes),
        }
    }


def vm_slice(accelerator_type: str) -> Slice | None:
    try:
        return Slice.parse(accelerator_type)
    except TopologyError:
        return None


def zone_of(ctx: Ctx, zone: str | None, kind: str = "tpu") -> str:
    if not zone:
        raise ctx.fail(
            f"Error parsing [{kind}].\nThe [{kind}] resource is not properly specified.\n"
            "Failed to find attribute [zone]. The attribute can be set in the following ways: \n"
            "- provide the argument `--zone` on the command line\n"
            "- set the property `compute/zone`"
        )
    return zone


def find_node(ctx: Ctx, state: State, name: str, zone: str) -> dict[str, Any]:
    """The node as the stand-in uses it (its worker-side fields added), or gcloud's NOT_FOUND."""
    project = ctx.project or state["project"]
    node: dict[str, Any] | None = state["tpu_vm"]["nodes"].get(name)
    if node is None or node["zone"] != zone or node["project"] != project:
        path = f"projects/{project}/locations/{zone}/nodes/{name}"
        raise ctx.fail(f"NOT_FOUND: Resource '{path}' was not found")
    for key, empty in _WORKER_SIDE.items():
        node.setdefault(key, empty.copy() if isinstance(empty, dict | list) else empty)
    return node
