"""The fake ``gcloud``: GKE clusters and node pools here, Compute Engine in gcloud_compute."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tpu_trainer.fakecloud import gcloud_compute, tpu_vm
from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit, run_tool
from tpu_trainer.fakecloud.formats import FormatError, matches, render
from tpu_trainer.fakecloud.gcloud_auth import TREE as ACCOUNT_TREE
from tpu_trainer.fakecloud.gcloud_auth import with_account
from tpu_trainer.fakecloud.gcloud_cli import (
    Ctx,
    Tree,
    add_location,
    location,
    resolve,
    split_filter,
)
from tpu_trainer.fakecloud.gke_text import CONTAINER_API, cluster_path, response_error
from tpu_trainer.fakecloud.pools import (
    CreateRequest,
    GkeError,
    cluster_json,
    create_pool,
    delete_pool,
    observe,
    pool_json,
    refusal_text,
)
from tpu_trainer.fakecloud.pools import require_cluster as _require_cluster
from tpu_trainer.fakecloud.state import State

_POOL_COLUMNS = ["name", "config.machineType", "config.diskSizeGb", "version:label=NODE_VERSION"]
_CLUSTER_COLUMNS = [
    "name",
    "location",
    "currentMasterVersion:label=MASTER_VERSION",
    "endpoint:label=MASTER_IP",
    "currentNodeVersion:label=NODE_VERSION",
    "currentNodeCount:label=NUM_NODES",
    "status",
]


def require_cluster(state: State, command: str, project: str, location: str, name: str) -> None:
    try:
        _require_cluster(state, project, location, name)
    except GkeError as e:
        raise ToolExit(response_error(command, e.code, e.message)) from None


def emit(ctx: Ctx, answer: Answer, data: Any, *, many: bool, columns: list[str]) -> None:
    """Print ``data`` in the command's ``--format``."""
    try:
        text = render(data, ctx.fmt, many=many, default_keys=columns)
    except FormatError:
        raise ToolExit(f"ERROR: ({ctx.command}) Format [{ctx.fmt}] not found.\n", 1) from None
    if text:
        answer.out(text)
    if many and not data and (ctx.fmt is None or ctx.fmt.startswith("table")):
        answer.err("Listed 0 items.")


# ---- clusters ----------------------------------------------------------------------------------
def clusters_describe(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    add_location(p)
    ns = p.parse_args(args)
    where = location(ctx, ns)

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        require_cluster(state, ctx.command, ctx.project or state["project"], where, ns.name)
        emit(ctx, answer, cluster_json(state), many=False, columns=_CLUSTER_COLUMNS)

    return run


def clusters_list(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("--filter")
    add_location(p)
    ns = p.parse_args(args)
    terms = split_filter(ns.filter) if ns.filter else []

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list"
        where = ns.location or ns.region or ns.zone
        visible = (
            state["cluster"]["exists"]
            and (ctx.project or state["project"]) == state["project"]
            and where in (None, "-", state["region"])
        )
        found = [cluster_json(state)] if visible else []
        found = [c for c in found if matches(c, terms)]
        emit(ctx, answer, found, many=True, columns=_CLUSTER_COLUMNS)

    return run


def clusters_get_credentials(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--dns-endpoint", action="store_true")
    p.add_argument("--internal-ip", action="store_true")
    add_location(p)
    ns = p.parse_args(args)
    where = location(ctx, ns)

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        require_cluster(state, ctx.command, ctx.project or state["project"], where, ns.name)
        answer.err("Fetching cluster endpoint and auth data.")
        answer.err(f"kubeconfig entry generated for {ns.name}.")

    return run


# ---- node pools --------------------------------------------------------------------------------
def _pool_parser(ctx: Ctx, *, named: bool) -> argparse.ArgumentParser:
    p = ctx.parser()
    if named:
        p.add_argument("name")
    p.add_argument("--cluster", required=True)
    add_location(p)
    return p


def pools_list(ctx: Ctx, args: list[str]) -> Handler:
    p = _pool_parser(ctx, named=False)
    p.add_argument("--filter")
    ns = p.parse_args(args)
    where = location(ctx, ns)
    terms = split_filter(ns.filter) if ns.filter else []

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list"
        require_cluster(state, ctx.command, ctx.project or state["project"], where, ns.cluster)
        for pool in state["node_pools"].values():
            observe(state, pool)
        found = [pool_json(state, pool) for pool in state["node_pools"].values()]
        emit(ctx, answer, [f for f in found if matches(f, terms)], many=True, columns=_POOL_COLUMNS)

    return run


def pools_describe(ctx: Ctx, args: list[str]) -> Handler:
    ns = _pool_parser(ctx, named=True).parse_args(args)
    where = location(ctx, ns)

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        project = ctx.project or state["project"]
        require_cluster(state, ctx.command, project, where, ns.cluster)
        pool = state["node_pools"].get(ns.name)
        if pool is None:
            path = f"{cluster_path(project, where, ns.cluster)}/nodePools/{ns.name}"
            raise ctx.fail(f"ResponseError: code=404, message=Not found: {path}.")
        observe(state, pool)
        emit(ctx, answer, pool_json(state, pool), many=False, columns=_POOL_COLUMNS)

    return run


def pools_delete(ctx: Ctx, args: list[str]) -> Handler:
    p = _pool_parser(ctx, named=True)
    p.add_argument("--async", action="store_true", dest="run_async")
    ns = p.parse_args(args)
    where = location(ctx, ns)

    def run(state: State, answer: Answer) -> None:
        project = ctx.project or state["project"]
        if not ctx.quiet:
            answer.err(
                f"The following node pool will be deleted.\n[{ns.name}] in cluster "
                f"[{ns.cluster}] in [{where}]\n\nDo you want to continue (Y/n)?  "
            )
        try:
            delete_pool(state, project, where, ns.cluster, ns.name)
        except GkeError as e:
            raise ToolExit(response_error(ctx.command, e.code, e.message)) from None
        link = f"{CONTAINER_API}/v1/projects/{project}/zones/{where}/clusters/{ns.cluster}"
        answer.err(f"Deleting node pool {ns.name}...done.")
        answer.err(f"Deleted [{link}/nodePools/{ns.name}].")

    return run


_CREATE_VALUE_FLAGS = [
    "--node-locations",
    "--machine-type",
    "--placement-policy",
    "--tpu-topology",
    "--placement-type",
    "--reservation-affinity",
    "--reservation",
    "--scopes",
    "--node-version",
    "--node-labels",
    "--host-maintenance-interval",
    "--workload-metadata",
    "--disk-type",
    "--image-type",
    "--location-policy",
    "--service-account",
    "--node-taints",
    "--accelerator",
    "--accelerator-network-profile",
    "--labels",
    "--tags",
    "--metadata",
    "--max-run-duration",
    "--node-pool-soak-duration",
]
_CREATE_INT_FLAGS = [
    "--num-nodes",
    "--max-pods-per-node",
    "--disk-size",
    "--min-nodes",
    "--max-nodes",
    "--local-ssd-count",
    "--total-min-nodes",
    "--total-max-nodes",
    "--min-provision-nodes",
]
_CREATE_BOOL_FLAGS = [
    "--enable-gvnic",
    "--spot",
    "--preemptible",
    "--async",
    "--enable-autoscaling",
    "--flex-start",
    "--enable-autorepair",
    "--no-enable-autorepair",
    "--enable-autoupgrade",
    "--no-enable-autoupgrade",
    "--enable-queued-provisioning",
    "--enable-image-streaming",
    "--enable-best-effort-provision",
    "--enable-surge-upgrade",
]


def _create_parser(ctx: Ctx) -> argparse.ArgumentParser:
    """The flags of ``node-pools create`` the fake knows (a subset of gcloud's)."""
    p = _pool_parser(ctx, named=True)
    for flag in _CREATE_VALUE_FLAGS:
        p.add_argument(flag)
    for flag in _CREATE_INT_FLAGS:
        p.add_argument(flag, type=int)
    for flag in _CREATE_BOOL_FLAGS:
        p.add_argument(flag, action="store_true")
    p.add_argument("--additional-node-network", action="append")
    return p


def pools_create(ctx: Ctx, args: list[str]) -> Handler:
    ns = _create_parser(ctx).parse_args(args)
    where = location(ctx, ns)
    labels = tuple(
        (k, v)
        for k, _, v in (item.partition("=") for item in (ns.node_labels or "").split(",") if item)
    )

    def run(state: State, answer: Answer) -> None:
        zones = [z for z in (ns.node_locations or "").split(",") if z]
        req = CreateRequest(
            command=ctx.command,
            project=ctx.project or state["project"],
            location=where,
            cluster=ns.cluster,
            name=ns.name,
            zone=zones[0] if zones else f"{state['region']}-a",
            machine_type=ns.machine_type or "e2-medium",
            num_nodes=3 if ns.num_nodes is None else ns.num_nodes,
            node_version=ns.node_version,
            placement_policy=ns.placement_policy,
            tpu_topology=ns.tpu_topology,
            placement_type=ns.placement_type,
            reservation_affinity=ns.reservation_affinity,
            reservation=ns.reservation,
            labels=labels,
            disable_autoupgrade=ns.no_enable_autoupgrade,
        )
        try:
            pool = create_pool(state, req)
        except GkeError as e:
            raise refusal_text(state, req, e) from None
        link = f"{CONTAINER_API}/v1beta1/projects/{req.project}/zones/{where}/clusters/{ns.cluster}"
        answer.err(f"Creating node pool {ns.name}...done.")
        answer.err(f"Created [{link}/nodePools/{ns.name}].")
        emit(ctx, answer, [pool_json(state, pool)], many=True, columns=_POOL_COLUMNS)

    return run


TREE: Tree = {
    "container": {
        "clusters": {
            "describe": clusters_describe,
            "list": clusters_list,
            "get-credentials": clusters_get_credentials,
        },
        "node-pools": {
            "list": pools_list,
            "describe": pools_describe,
            "delete": pools_delete,
            "create": pools_create,
        },
    },
    "compute": {**gcloud_compute.TREE, "tpus": tpu_vm.tree()},
}


GCLOUD: Tree = {**with_account(TREE), **ACCOUNT_TREE}
"""Every command; all but ``auth`` and ``config`` need an active account."""


def main(argv: list[str]) -> int:
    """Answer one gcloud command line (without the leading ``gcloud``)."""
    return run_tool("gcloud", argv, lambda a: resolve(GCLOUD, list(a)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
