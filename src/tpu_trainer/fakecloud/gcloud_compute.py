"""The fake ``gcloud compute``: reservations and resource (workload) policies."""

from __future__ import annotations

from typing import Any

from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit
from tpu_trainer.fakecloud.formats import FormatError, matches, render
from tpu_trainer.fakecloud.gcloud_cli import Ctx, Tree, split_filter
from tpu_trainer.fakecloud.gke_text import compute_url, fetch_error
from tpu_trainer.fakecloud.pools import chips_per_host, tpu_accelerator
from tpu_trainer.fakecloud.state import State, new_policy

_RESERVATION_COLUMNS = [
    "name",
    "aggregateReservation.inUseHostCount:label=IN_USE",
    "aggregateReservation.hostCount:label=COUNT",
    "zone.basename()",
]
_POLICY_COLUMNS = ["name", "region.basename()", "creationTimestamp"]


def _emit(ctx: Ctx, answer: Answer, data: Any, *, many: bool, columns: list[str]) -> None:
    try:
        text = render(data, ctx.fmt, many=many, default_keys=columns)
    except FormatError:
        raise ToolExit(f"ERROR: ({ctx.command}) Format [{ctx.fmt}] not found.\n", 1) from None
    if text:
        answer.out(text)
    if many and not data and (ctx.fmt is None or ctx.fmt.startswith("table")):
        answer.err("Listed 0 items.")


def reservation_json(state: State, res: dict[str, Any], track: str) -> dict[str, Any]:
    """A TPU aggregate reservation; host counts (int64, so strings) only on alpha/beta."""
    project, zone = state["project"], res["zone"]
    machine = res.get("machine_type") or "tpu7x-standard-4t"
    acc = tpu_accelerator(machine)
    per_host = chips_per_host(machine) or 4
    accelerator = f"projects/{project}/zones/{zone}/acceleratorTypes/{acc.gke_accelerator if acc else 'tpu7x'}"
    aggregate: dict[str, Any] = {
        "reservedResources": [
            {
                "accelerator": {
                    "acceleratorCount": res["host_count"] * per_host,
                    "acceleratorType": accelerator,
                }
            }
        ],
        "inUseResources": [
            {
                "accelerator": {
                    "acceleratorCount": res["in_use_hosts"] * per_host,
                    "acceleratorType": accelerator,
                }
            }
        ],
        "workloadType": "BATCH",
    }
    if track:
        aggregate["hostCount"] = str(res["host_count"])
        aggregate["inUseHostCount"] = str(res["in_use_hosts"])
    # The API has no DEGRADED status: a scenario's DEGRADED is health, the status stays READY.
    degraded = "DEGRADED" in (res["status"], res.get("health"))
    health: dict[str, Any] = {"healthStatus": "DEGRADED" if degraded else "HEALTHY"}
    if degraded:
        health["degradedBlockCount"] = 1
    return {
        "kind": "compute#reservation",
        "id": str(7_300_000_000_000_000_000 + sum(map(ord, res["name"]))),
        "creationTimestamp": "2026-10-01T08:00:00.000-07:00",
        "name": res["name"],
        "selfLink": compute_url(project, f"zones/{zone}", "reservations", res["name"]),
        "zone": compute_url(project, f"zones/{zone}"),
        "status": "READY" if res["status"] == "DEGRADED" else res["status"],
        "resourceStatus": {"healthInfo": health},
        "specificReservationRequired": True,
        "deploymentType": "DENSE",
        "aggregateReservation": aggregate,
    }


def reservations_describe(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--zone")
    ns = p.parse_args(args)
    if not ns.zone:
        raise ctx.fail(
            "Error parsing [reservation].\nThe [reservation] resource is not properly specified.\n"
            "Failed to find attribute [zone]. The attribute can be set in the following ways: \n"
            "- provide the argument `reservation` on the command line with a fully specified name\n"
            "- provide the argument `--zone` on the command line\n"
            "- set the property `compute/zone`"
        )

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        project = ctx.project or state["project"]
        res = state["reservations"].get(ns.name)
        if res is None or res["zone"] != ns.zone or project != state["project"]:
            where = f"projects/{project}/zones/{ns.zone}/reservations/{ns.name}"
            raise ToolExit(fetch_error(ctx.command, where))
        data = reservation_json(state, res, ctx.track)
        _emit(ctx, answer, data, many=False, columns=_RESERVATION_COLUMNS)

    return run


def reservations_list(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("--filter")
    ns = p.parse_args(args)
    terms = split_filter(ns.filter) if ns.filter else []

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list"
        if (ctx.project or state["project"]) != state["project"]:
            found: list[dict[str, Any]] = []
        else:
            found = [reservation_json(state, r, ctx.track) for r in state["reservations"].values()]
        found = [r for r in found if matches(r, terms)]
        _emit(ctx, answer, found, many=True, columns=_RESERVATION_COLUMNS)

    return run


# ---- resource policies ---------------------------------------------------------------------------
def policy_json(state: State, policy: dict[str, Any]) -> dict[str, Any]:
    project, region = state["project"], state["region"]
    workload: dict[str, Any] = {"type": policy["type"]}
    if policy.get("accelerator_topology"):
        workload["acceleratorTopology"] = policy["accelerator_topology"]
    return {
        "kind": "compute#resourcePolicy",
        "id": str(5_100_000_000_000_000_000 + sum(map(ord, policy["name"]))),
        "creationTimestamp": "2026-10-01T08:00:00.000-07:00",
        "name": policy["name"],
        "region": compute_url(project, f"regions/{region}"),
        "selfLink": compute_url(project, f"regions/{region}", "resourcePolicies", policy["name"]),
        "status": "READY",
        "workloadPolicy": workload,
    }


def _policy_name_and_region(ctx: Ctx, args: list[str], *extra: str) -> Any:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--region")
    for flag in extra:
        p.add_argument(flag)
    ns = p.parse_args(args)
    if not ns.region:
        raise ctx.fail(f"Underspecified resource [{ns.name}]. Specify the [--region] flag.")
    return ns


def _policy_path(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/resourcePolicies/{name}"


def policies_describe(ctx: Ctx, args: list[str]) -> Handler:
    ns = _policy_name_and_region(ctx, args)

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        project = ctx.project or state["project"]
        policy = state["resource_policies"].get(ns.name)
        if policy is None or ns.region != state["region"] or project != state["project"]:
            raise ToolExit(fetch_error(ctx.command, _policy_path(project, ns.region, ns.name)))
        _emit(ctx, answer, policy_json(state, policy), many=False, columns=_POLICY_COLUMNS)

    return run


def policies_list(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("--filter")
    p.add_argument("--regions")
    ns = p.parse_args(args)
    terms = split_filter(ns.filter) if ns.filter else []

    def run(state: State, answer: Answer) -> None:
        answer.latency = "list"
        found = [policy_json(state, pol) for pol in state["resource_policies"].values()]
        found = [f for f in found if matches(f, terms)]
        _emit(ctx, answer, found, many=True, columns=_POLICY_COLUMNS)

    return run


def policies_create_workload(ctx: Ctx, args: list[str]) -> Handler:
    ns = _policy_name_and_region(
        ctx,
        args,
        "--type",
        "--accelerator-topology",
        "--accelerator-topology-mode",
        "--max-topology-distance",
        "--description",
    )
    if ns.type not in ("HIGH_THROUGHPUT", "HIGH_AVAILABILITY"):
        raise ctx.fail(f"argument --type: Invalid choice: '{ns.type}'.", 2)

    def run(state: State, answer: Answer) -> None:
        project = ctx.project or state["project"]
        path = _policy_path(project, ns.region, ns.name)
        if ns.region != state["region"] or project != state["project"]:
            raise ToolExit(fetch_error(ctx.command, f"projects/{project}/regions/{ns.region}"))
        if ns.name in state["resource_policies"]:
            raise ToolExit(fetch_error(ctx.command, path, "already exists"))
        policy = new_policy(ns.name, ns.accelerator_topology)
        policy["type"] = ns.type
        state["resource_policies"][ns.name] = policy
        answer.err(
            f"Created [{compute_url(project, f'regions/{ns.region}', 'resourcePolicies', ns.name, track=ctx.track)}]."
        )

    return run


def policies_delete(ctx: Ctx, args: list[str]) -> Handler:
    ns = _policy_name_and_region(ctx, args)

    def run(state: State, answer: Answer) -> None:
        project = ctx.project or state["project"]
        path = _policy_path(project, ns.region, ns.name)
        if ns.name not in state["resource_policies"] or ns.region != state["region"]:
            raise ToolExit(fetch_error(ctx.command, path))
        users = [p for p in state["node_pools"].values() if p["placement_policy"] == ns.name]
        if users:
            pool = users[0]
            instance = f"projects/{project}/zones/{pool['zone']}/instances/gke-{state['cluster']['name']}-{pool['name']}-0"
            raise ToolExit(
                fetch_error(ctx.command, path, f"is already being used by '{instance}'").replace(
                    "The resource '", "The resource_policy resource '"
                )
            )
        del state["resource_policies"][ns.name]
        answer.err(
            f"Deleted [{compute_url(project, f'regions/{ns.region}', 'resourcePolicies', ns.name)}]."
        )

    return run


TREE: Tree = {
    "reservations": {"describe": reservations_describe, "list": reservations_list},
    "resource-policies": {
        "describe": policies_describe,
        "list": policies_list,
        "delete": policies_delete,
        "create": {"workload-policy": policies_create_workload},
    },
}
