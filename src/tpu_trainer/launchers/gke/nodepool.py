"""Node pool requests and names (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from tpu_trainer.plan.slices import Slice

GKE_SCOPES = "storage-full,gke-default,https://www.googleapis.com/auth/cloud-platform"
TOOL_POOL_PREFIX = "tpt-"
"""Node pools the tool creates itself (gcloud fallback) are named ``tpt-<run>-<device>``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePoolRequest:
    name: str
    cluster: str
    project: str
    region: str
    zone: str
    reservation: str
    slice: Slice
    node_version: str
    machine_type: str


def tool_pool_name(run_id: str, slice_: Slice, index: int = 0, num_slices: int = 1) -> str:
    """``tpt-<first 8 of run id>-<device number form>``: ours, unique, at most 40 characters.

    A multi-slice run has one pool per slice, ``...-<device>-<slice index>`` (as xpk numbers its
    ``<cluster>-np-<i>`` pools)."""
    base = f"{TOOL_POOL_PREFIX}{run_id[:8]}-{slice_.device_type_number}"
    if num_slices <= 1:
        return base[:40].rstrip("-")
    tail = f"-{index}"
    return base[: 40 - len(tail)].rstrip("-") + tail


def run_of_tool_pool(name: str) -> str | None:
    """The run-id prefix a tool-named pool carries, or None for any other pool."""
    if not name.startswith(TOOL_POOL_PREFIX):
        return None
    return name[len(TOOL_POOL_PREFIX) :].split("-", 1)[0] or None


def xpk_pool_names(cluster: str, existing: list[str], count: int) -> list[str]:
    """The names ``xpk cluster adapt`` gives its pools: ``<cluster>-np-<i>``, first free indexes,
    keeping existing ones first (as xpk's get_desired_node_pool_names does)."""
    prefix = f"{cluster}-np-"
    names = [n for n in existing if n.startswith(prefix)][:count]
    i = 0
    while len(names) < count:
        candidate = f"{prefix}{i}"
        if candidate not in names:
            names.append(candidate)
        i += 1
    return sorted(names)


def gcloud_create_argv(req: NodePoolRequest) -> list[str]:
    """``gcloud beta container node-pools create`` with the flags that work for TPU slices.

    TPU v7 multi-host pools take ``--placement-policy`` (the workload policy) and never
    ``--placement-type``/``--tpu-topology``; other multi-host TPU pools take ``--tpu-topology``;
    single-host pools take neither. Autoupgrade is left alone (RAPID channel enforces it).
    """
    s = req.slice
    argv = [
        "gcloud",
        "beta",
        "container",
        "node-pools",
        "create",
        req.name,
        f"--cluster={req.cluster}",
        f"--project={req.project}",
        f"--location={req.region}",
        f"--node-locations={req.zone}",
        f"--machine-type={req.machine_type}",
        f"--num-nodes={s.hosts}",
    ]
    if s.multi_host and s.workload_policy:
        argv.append(f"--placement-policy={s.workload_policy}")
    elif s.multi_host:
        argv.append(f"--tpu-topology={s.topology_name}")
    argv += [
        "--reservation-affinity=specific",
        f"--reservation={req.reservation}",
        "--enable-gvnic",
        f"--scopes={GKE_SCOPES}",
        "--max-pods-per-node=15",
        f"--node-version={req.node_version}",
    ]
    return argv


def pool_matches(
    machine_type: str,
    node_count: int,
    tpu_topology: str | None,
    placement_policy: str | None,
    slice_: Slice,
    allowed_machine_types: tuple[str, ...],
) -> bool:
    """Whether an existing pool can run ``slice_``."""
    if machine_type not in allowed_machine_types or node_count != slice_.hosts:
        return False
    if slice_.workload_policy:
        return placement_policy == slice_.workload_policy
    if slice_.multi_host:
        return tpu_topology == slice_.topology_name
    return True


def machine_types(slice_: Slice, override: str | None) -> tuple[str, ...]:
    """Machine types a pool for ``slice_`` may have (the configured one first)."""
    acc = slice_.accelerator
    base = (
        (slice_.machine_type, *acc.other_machine_types)
        if slice_.chips > 1
        else (slice_.machine_type,)
    )
    return (override, *[m for m in base if m != override]) if override else base
