"""The fake ``gcloud compute tpus tpu-vm``: create, describe, list, delete and scp (``ssh`` is
in :mod:`tpu_trainer.fakecloud.tpu_vm_ssh`, queued resources in
:mod:`tpu_trainer.fakecloud.tpu_queued`).

Texts marked in docs/simulated-cloud.md as verified come from real gcloud output; the others are
the fake's own wording, built to carry the same markers (``INVALID_ARGUMENT``, ``NOT_FOUND``).
"""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.fakecloud.common import Answer, Handler
from tpu_trainer.fakecloud.gcloud_cli import Ctx, Tree
from tpu_trainer.fakecloud.state import State, next_id
from tpu_trainer.fakecloud.tpu_vm_nodes import (
    check_request,
    emit,
    find_node,
    new_node,
    no_capacity,
    node_json,
    node_path,
    observe,
    operation,
    zone_of,
)


# ---- tpu-vm --------------------------------------------------------------------------------------
def vm_create(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    for flag in (
        "--zone",
        "--accelerator-type",
        "--version",
        "--network",
        "--subnetwork",
        "--description",
        "--service-account",
        "--labels",
        "--metadata",
        "--tags",
        "--range",
        "--type",
        "--topology",
    ):
        p.add_argument(flag)
    for flag in ("--preemptible", "--reserved", "--async", "--internal-ips"):
        p.add_argument(flag, action="store_true")
    if ctx.track == "alpha":
        p.add_argument("--spot", action="store_true")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone)

    def run(state: State, answer: Answer) -> None:
        project = ctx.project or state["project"]
        nodes = state["tpu_vm"]["nodes"]
        if project != state["project"]:
            raise ctx.fail(
                f"PERMISSION_DENIED: Permission denied on 'locations/{zone}' (or it may not exist)."
            )
        if ns.name in nodes:
            raise ctx.fail(
                f"ALREADY_EXISTS: Resource '{node_path(project, zone, ns.name)}' already exists"
            )
        check_request(ctx, state, zone, ns.accelerator_type, ns.version)
        answer.err(f"Create request issued for: [{ns.name}]")
        waiting = f"Waiting for operation [{operation(project, zone, state)}] to complete..."
        if state["tpu_vm"]["behaviour"]["capacity"] == "exhausted":
            answer.err(waiting + "failed.")
            raise no_capacity(ctx, zone, state)
        nodes[ns.name] = new_node(
            ns.name,
            zone=zone,
            project=project,
            accelerator_type=ns.accelerator_type,
            runtime_version=ns.version,
            state="CREATING",
            seq=next_id(state),
            polls_left=state["tpu_vm"]["behaviour"]["creating_polls"],
            scheduling={
                "preemptible": ns.preemptible,
                "reserved": ns.reserved,
                "spot": bool(getattr(ns, "spot", False)),
            },
        )
        answer.err(waiting + "done.")
        answer.err(f"Created tpu [{ns.name}].")

    return run


def vm_describe(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--zone")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone)

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        node = find_node(ctx, state, ns.name, zone)
        observe(node)
        emit(ctx, answer, node_json(node), many=False)

    return run


def vm_list(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("--zone")
    p.add_argument("--filter")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone, "location")

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list"
        project = ctx.project or state["project"]
        nodes = [
            n
            for n in state["tpu_vm"]["nodes"].values()
            if n["project"] == project and zone in ("-", n["zone"])
        ]
        for node in nodes:
            observe(node)
        if ctx.fmt is None:
            rows = [
                {
                    "name": n["name"],
                    "zone": n["zone"],
                    "acceleratorType": n["accelerator_type"],
                    "network": "default",
                    "cidrBlock": "10.128.0.0/20",
                    "state": n["state"],
                }
                for n in nodes
            ]
            emit(ctx, answer, rows, many=True)
        else:
            emit(ctx, answer, [node_json(n) for n in nodes], many=True)

    return run


def vm_delete(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--zone")
    p.add_argument("--async", action="store_true", dest="run_async")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone)

    def run(state: State, answer: Answer) -> None:
        node = find_node(ctx, state, ns.name, zone)
        if not ctx.quiet:
            answer.err(f"Your TPU [{ns.name}] will be deleted.\n\nDo you want to continue (Y/n)?  ")
        answer.err(f"Delete request issued for: [{ns.name}]")
        project = node["project"]
        answer.err(f"Waiting for operation [{operation(project, zone, state)}] to complete...done.")
        del state["tpu_vm"]["nodes"][ns.name]
        queued = state["tpu_vm"]["queued"].get(node.get("queued_resource") or "")
        if queued is not None:
            queued["state"] = "SUSPENDED"
        answer.err(f"Deleted tpu [{ns.name}].")

    return run


def vm_scp(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("paths", nargs="+")
    p.add_argument("--zone")
    p.add_argument("--worker", default="0")
    p.add_argument("--recurse", action="store_true")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone)
    if len(ns.paths) < 2 or ":" not in ns.paths[-1]:
        raise ctx.fail("Argument [dest] must name the TPU VM: TPU:PATH.", 2)
    target, _, dest = ns.paths[-1].partition(":")
    sources = [Path(s) for s in ns.paths[:-1]]

    def run(state: State, answer: Answer) -> None:
        node = find_node(ctx, state, target.rpartition("@")[2], zone)
        for src in sources:
            if not src.is_file():
                raise ctx.fail(f"[{src}]: No such file or directory", 1)
        folder = dest.rstrip("/")
        for src in sources:
            node["files"][f"{folder}/{src.name}" if folder else src.name] = src.stat().st_size
        answer.err(f"Using scp batch size of {len(sources)}.")

    return run


def tree() -> Tree:
    from tpu_trainer.fakecloud.tpu_queued import queued_create, queued_delete, queued_describe
    from tpu_trainer.fakecloud.tpu_vm_ssh import vm_ssh

    return {
        "tpu-vm": {
            "create": vm_create,
            "describe": vm_describe,
            "list": vm_list,
            "delete": vm_delete,
            "ssh": vm_ssh,
            "scp": vm_scp,
        },
        "queued-resources": {
            "create": queued_create,
            "describe": queued_describe,
            "delete": queued_delete,
        },
    }
