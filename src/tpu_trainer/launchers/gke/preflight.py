"""The pre-training checklist: the seed's six checks (and multi-slice prerequisites), run at once."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tpu_trainer.config.model import Config
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import Cluster, Gcloud, NodePool, Reservation
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import LOGIN_FIX
from tpu_trainer.launchers.gke.kueue import (
    CLUSTER_QUEUE,
    CONFIGMAP_NAMESPACE,
    Finding,
    configmap_name,
    kueue_findings,
)
from tpu_trainer.launchers.gke.nodepool import (
    NodePoolRequest,
    gcloud_create_argv,
    machine_types,
    xpk_pool_names,
)
from tpu_trainer.launchers.gke.provision import matching_pools
from tpu_trainer.plan.plan import Level, Plan

MULTISLICE_RECREATE = (
    "multi-slice needs cluster-level networking that cannot be enabled after creation "
    "(multi-networking with a second VPC for DCN, Dataplane V2): recreate the cluster with "
    "`--enable-multi-networking --enable-dataplane-v2` (xpk cluster create sets these up)"
)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    status: Level
    message: str
    fix: str = ""
    fix_argv: tuple[str, ...] = ()
    """Command that fixes it, when it can be run automatically (``--fix``)."""
    finding: Finding | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Observed:
    cluster: Cluster | None
    pools: list[NodePool]
    policy_exists: bool | None
    flavor: dict[str, Any] | None
    cluster_queue: dict[str, Any] | None
    configmap: dict[str, Any] | None
    local_queue: dict[str, Any] | None = None


def observe(plan: Plan, config: Config, gcloud: Gcloud, kubectl: Kubectl) -> Observed:
    """Ask the cloud everything the checks need, all at once."""
    s, n = plan.slice, plan.num_slices
    policy = s.workload_policy
    calls: dict[str, Callable[[], Any]] = {
        "cluster": lambda: gcloud.cluster(config.cluster_name, config.region),
        "pools": lambda: gcloud.node_pools(config.cluster_name, config.region),
        "policy": lambda: gcloud.resource_policy_exists(policy, config.region) if policy else None,
        "flavor": lambda: kubectl.get("resourceflavor", s.kueue_flavor(n)),
        "queue": lambda: kubectl.get("clusterqueue", CLUSTER_QUEUE),
        "local": lambda: kubectl.get("localqueue", plan.local_queue, CONFIGMAP_NAMESPACE),
        "configmap": lambda: kubectl.get(
            "configmap", configmap_name(config.cluster_name), CONFIGMAP_NAMESPACE
        ),
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {k: pool.submit(f) for k, f in calls.items()}
        got = {k: f.result() for k, f in futures.items()}
    return Observed(
        got["cluster"],
        got["pools"],
        got["policy"],
        got["flavor"],
        got["queue"],
        got["configmap"],
        got["local"],
    )


def checks(plan: Plan, config: Config, seen: Observed) -> list[Check]:
    """The checklist as results (pure)."""
    out = [_policy_check(plan, config, seen)]
    data = None if seen.configmap is None else dict(seen.configmap.get("data") or {})
    problems = kueue_findings(
        config.cluster_name,
        plan.slice,
        plan.num_slices,
        flavor=seen.flavor,
        cluster_queue=seen.cluster_queue,
        configmap_data=data,
        local_queue_exists=seen.local_queue is not None,
        local_queue_name=plan.local_queue,
    )
    for name, subject in (
        ("kueue-resourceflavor", "ResourceFlavor"),
        ("kueue-clusterqueue", "ClusterQueue"),
        ("kueue-localqueue", "LocalQueue"),
        ("xpk-configmap", "ConfigMap"),
    ):
        found = next((f for f in problems if f.subject.startswith(subject)), None)
        shown = f"{subject} {plan.local_queue}" if subject == "LocalQueue" else subject
        if found is None:
            out.append(
                Check(
                    name,
                    Level.PASS,
                    f"{shown} ready for {plan.slice.kueue_flavor(plan.num_slices)}",
                )
            )
        else:
            out.append(Check(name, Level.FAIL, found.message, found.fix, found.argv, found))
    out += _pool_checks(plan, config, seen)
    if plan.num_slices > 1:
        out += multislice_checks(plan, seen.cluster)
    return out


def _policy_check(plan: Plan, config: Config, seen: Observed) -> Check:
    policy = plan.slice.workload_policy
    if policy is None:
        return Check("placement-policy", Level.PASS, f"{plan.slice} needs no workload policy")
    if seen.policy_exists:
        return Check("placement-policy", Level.PASS, f"workload policy {policy} exists")
    argv = (
        "gcloud",
        "beta",
        "compute",
        "resource-policies",
        "create",
        "workload-policy",
        policy,
        "--type=HIGH_THROUGHPUT",
        f"--accelerator-topology={plan.slice.topology_name}",
        f"--region={config.region}",
        f"--project={config.project_id}",
    )
    return Check(
        "placement-policy",
        Level.FAIL,
        f"workload policy {policy} does not exist in {config.region}: xpk's pods select "
        "nodes by it",
        " ".join(argv),
        argv,
    )


def _pool_checks(plan: Plan, config: Config, seen: Observed) -> list[Check]:
    n = plan.num_slices
    matching = matching_pools(seen.pools, plan.slice, config.machine_type)
    running = [p for p in matching if p.status == "RUNNING"]
    if len(running) >= n:
        shown = ", ".join(p.name for p in running[:n])
        pool_check = Check(
            "node-pool",
            Level.PASS,
            f"node pool{'s' if n > 1 else ''} {shown} RUNNING "
            f"({running[0].node_count} × {running[0].machine_type} each)",
        )
    else:
        states = ", ".join(f"{p.name} {p.status}" for p in matching) or "none"
        pool_check = Check(
            "node-pool",
            Level.FAIL,
            f"{len(running)} of {n} RUNNING node pools for {plan.slice} (one per slice; "
            f"matching pools: {states})",
            _pool_fix(plan, config, seen),
        )
    zone = plan.value_of("ZONE")
    pool_zone = running[0].zones[0] if running and running[0].zones else None
    if pool_zone is None:
        zone_check = Check(
            "submit-zone", Level.WARN, f"submit zone {zone}: no running pool to compare with"
        )
    elif pool_zone == zone:
        zone_check = Check("submit-zone", Level.PASS, f"submit zone {zone} is the node pool's zone")
    else:
        slices = f" --num-slices {n}" if n > 1 else ""
        zone_check = Check(
            "submit-zone",
            Level.FAIL,
            f"the submit script uses zone {zone} but the node pool is in {pool_zone}",
            f"tpu-trainer scripts {shlex.quote(str(plan.recipe_script.parent))} "
            f"--zone {pool_zone}{slices}",
        )
    return [pool_check, zone_check]


def _pool_fix(plan: Plan, config: Config, seen: Observed) -> str:
    """`tpu-trainer train` (which makes the pools and deletes them after the run), or the
    gcloud commands that make them for good."""
    slices = f" --num-slices {plan.num_slices}" if plan.num_slices > 1 else ""
    train = f"tpu-trainer train {shlex.quote(str(plan.recipe_script.parent))}{slices}"
    if not config.reservations:
        return f"`{train}` (after adding `reservations:` to the configuration)"
    ref = config.reservations[0]
    names = xpk_pool_names(config.cluster_name, [p.name for p in seen.pools], plan.num_slices)
    version = seen.cluster.node_version if seen.cluster else "<cluster node version>"
    commands = [
        shlex.join(
            gcloud_create_argv(
                NodePoolRequest(
                    name=name,
                    cluster=config.cluster_name,
                    project=config.project_id,
                    region=config.region,
                    zone=ref.zone or config.default_zone,
                    reservation=ref.name,
                    slice=plan.slice,
                    node_version=version,
                    machine_type=machine_types(plan.slice, config.machine_type)[0],
                )
            )
        )
        for name in names
    ]
    what = "one pool per slice" if plan.num_slices > 1 else "the pool"
    return (
        f"`{train}` makes {what} from the reservations (deleted after the run); to make "
        "them by hand: " + " && ".join(commands)
    )


def multislice_checks(plan: Plan, cluster: Cluster | None) -> list[Check]:
    """Seed 000's multi-slice (DCN) prerequisites."""
    out: list[Check] = []
    if cluster is None:
        return [
            Check(
                "cluster",
                Level.FAIL,
                "cluster not found",
                "set cluster_name and region in the configuration to a cluster that "
                "`gcloud container clusters list` shows",
            )
        ]
    dp = cluster.datapath == "ADVANCED_DATAPATH"
    out.append(
        Check(
            "multislice-dataplane-v2",
            Level.PASS if dp else Level.FAIL,
            f"cluster datapath is {cluster.datapath}",
            "" if dp else MULTISLICE_RECREATE,
        )
    )
    mn = cluster.multi_networking
    out.append(
        Check(
            "multislice-multi-networking",
            Level.PASS if mn else Level.FAIL,
            "multi-networking (second NIC and VPC for DCN) is " + ("enabled" if mn else "disabled"),
            "" if mn else MULTISLICE_RECREATE,
        )
    )
    grpc = any(f.startswith("--megascale_grpc_interface_prefixes") for f in plan.xla_flags)
    out.append(
        Check(
            "multislice-grpc-interfaces",
            Level.PASS if grpc else Level.FAIL,
            "LIBTPU_INIT_ARGS "
            + ("sets" if grpc else "lacks")
            + " --megascale_grpc_interface_prefixes",
            ""
            if grpc
            else "add --megascale_grpc_interface_prefixes=eth1,eth2,lo to the recipe's XLA_FLAGS",
        )
    )
    dcn = _dcn_product(plan)
    ok = dcn in (plan.num_slices, -1)
    out.append(
        Check(
            "multislice-dcn",
            Level.PASS if ok else Level.FAIL,
            f"dcn_* parallelism product {dcn} for {plan.num_slices} slices",
            "" if ok else f"--set dcn_data_parallelism={plan.num_slices}",
        )
    )
    flag = next((v for k, v in plan.xpk_flags if k == "--num-slices"), None)
    ok_flag = flag == str(plan.num_slices)
    out.append(
        Check(
            "multislice-num-slices",
            Level.PASS if ok_flag else Level.FAIL,
            f"xpk --num-slices={flag}",
            "" if ok_flag else f"--num-slices {plan.num_slices}",
        )
    )
    return out


def _dcn_product(plan: Plan) -> int:
    """The product of the dcn_*_parallelism arguments; -1 when one is -1 or none is given
    (MaxText's default dcn_data_parallelism=-1 spreads over every slice)."""
    product = 1
    given = False
    for text in plan.program_arg_texts:
        key, _, value = text.partition("=")
        if key.startswith("dcn_") and key.endswith("_parallelism"):
            try:
                n = int(value)
            except ValueError:
                continue
            if n == -1:
                return -1
            given = True
            product *= n
    return product if given else -1


class NotReadyError(TpuTrainerError):
    """gcloud, the cluster or the cluster's networking cannot run the request: nothing was made."""


def require_account(gcloud: Gcloud) -> str:
    """The active gcloud account; stops with the login command when there is none."""
    account = gcloud.active_account()
    if account is None:
        raise NotReadyError(
            "gcloud has no active account (`gcloud auth list` shows none): every gcloud "
            "command would fail with 'You do not currently have an active account selected'",
            fix=LOGIN_FIX,
        )
    return account


def require_cluster(config: Config, gcloud: Gcloud) -> Cluster:
    """The configured cluster; stops naming the clusters that do exist when it is not there."""
    cluster = gcloud.cluster(config.cluster_name, config.region)
    if cluster is not None:
        return cluster
    others = gcloud.cluster_names(config.region)
    where = f"{config.region} (project {config.project_id})"
    found = f"clusters there: {', '.join(others)}" if others else "there are no clusters there"
    raise NotReadyError(
        f"cluster {config.cluster_name} not found in {where}; {found}",
        fix=(
            f"set `cluster_name: {others[0]}` (or the right one) in the configuration"
            if others
            else "set cluster_name/region in the configuration to an existing cluster, or "
            "create one with `xpk cluster create`"
        ),
    )


@dataclass(frozen=True, slots=True)
class Ready:
    """What the prerequisites found: the cluster, its node pools before the run, and the
    project's number for xpk (None when it cannot be read: xpk then asks Resource Manager for
    it itself)."""

    cluster: Cluster
    project_number: str | None
    pools: list[NodePool]
    reservations: list[Reservation | None] | None = None
    """The configured reservations as they were found (``Gcloud.reservations``), for the
    provisioner's survey; None when none are configured."""


def _answer(
    asked: Future[list[Reservation | None]] | None,
) -> list[Reservation | None] | None:
    """The reservations found, or None when the list failed: a run that reuses a pool needs
    none, and one that creates asks again (and stops there, naming the problem)."""
    if asked is None:
        return None
    try:
        return asked.result()
    except TpuTrainerError:
        return None


def before_create(plan: Plan, config: Config, gcloud: Gcloud) -> Ready:
    """What must hold before the first create call: gcloud credentials, the cluster, and for a
    multi-slice run its prerequisites (the account, the cluster, its node pools, the project's
    number and the configured reservations are asked for at once). Raises
    :class:`NotReadyError` naming the fix."""
    refs = [(ref.name, ref.zone) for ref in config.reservations]
    with ThreadPoolExecutor(max_workers=5) as pool:  # five questions, asked at once
        account = pool.submit(require_account, gcloud)
        number = pool.submit(gcloud.project_number)
        found = pool.submit(require_cluster, config, gcloud)
        listed = pool.submit(gcloud.node_pools, config.cluster_name, config.region)
        surveyed = pool.submit(gcloud.reservations, refs) if refs else None
        account.result()  # without an account every answer is that: say so first
        cluster = found.result()  # no cluster: its pools cannot be listed either
        project_number, pools = number.result(), listed.result()
        reservations = _answer(surveyed)
    if plan.num_slices > 1:
        failed = [c for c in multislice_checks(plan, cluster) if c.status is Level.FAIL]
        if failed:
            lines = "\n".join(f"  {c.name}: {c.message}" for c in failed)
            fixes = "; ".join(dict.fromkeys(c.fix for c in failed if c.fix))
            raise NotReadyError(
                f"{config.cluster_name} cannot run {plan.num_slices} slices of {plan.slice} "
                f"(nothing was created):\n{lines}",
                fix=fixes,
            )
    return Ready(cluster, project_number, pools, reservations)
