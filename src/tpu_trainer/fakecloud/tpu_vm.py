"""The local stand-in for ``gcloud compute tpus tpu-vm scp`` (``ssh`` is in
:mod:`tpu_trainer.fakecloud.tpu_vm_ssh`): neither is an API call, so they stay here, on the
nodes the emulated Cloud TPU API (``simcloud.tpu``) keeps in the same state file. Every other
``tpu-vm`` and ``queued-resources`` command is the real gcloud's, against that API.
"""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.fakecloud.common import Answer, Handler
from tpu_trainer.fakecloud.gcloud_cli import Ctx, Tree
from tpu_trainer.fakecloud.state import State
from tpu_trainer.fakecloud.tpu_vm_nodes import find_node, zone_of


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
    from tpu_trainer.fakecloud.tpu_vm_ssh import vm_ssh

    return {"tpu-vm": {"ssh": vm_ssh, "scp": vm_scp}}
