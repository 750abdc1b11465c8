"""Node pools as a run sees them: which match a slice, what provisioning gave, and waiting for a
pool to be RUNNING."""

from __future__ import annotations

from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.config.model import Config
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import Gcloud, NodePool
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Expired, Pending, Tick, wait_until
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.gke.nodepool import machine_types, pool_matches
from tpu_trainer.plan.slices import Slice


def matching_pools(
    pools: list[NodePool], slice_: Slice, machine_type: str | None
) -> list[NodePool]:
    """The pools that can run ``slice_`` (machine type, hosts, topology or workload policy)."""
    allowed = machine_types(slice_, machine_type)
    return [
        p
        for p in pools
        if pool_matches(
            p.machine_type, p.node_count, p.tpu_topology, p.placement_policy, slice_, allowed
        )
    ]


class CapacityError(TpuTrainerError):
    """No reservation could give the slice."""


class PoolInError(TpuTrainerError):
    """A node pool went to ERROR while it was being created."""


@dataclass(frozen=True, slots=True)
class Attempt:
    reservation: str
    zone: str | None
    status: str | None
    free_hosts: int | None
    outcome: str
    message: str = ""


@dataclass
class Provisioned:
    pool: str
    zone: str
    created: bool
    attempts: list[Attempt] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    """Every pool the run uses, one per slice (``pool`` is the first)."""

    def __post_init__(self) -> None:
        if not self.pools:
            self.pools = [self.pool]


def wait_running(
    gcloud: Gcloud,
    config: Config,
    name: str,
    display: Display,
    *,
    run_id: str,
    poll_seconds: float,
    timeout_s: float,
    clock: Clock = SYSTEM_CLOCK,
) -> NodePool:
    """Wait out PROVISIONING (it cannot be cancelled), showing the time waited."""

    def check(tick: Tick) -> NodePool | Pending:
        pool = gcloud.node_pool(config.cluster_name, config.region, name)
        if pool is None:
            raise TpuTrainerError(
                f"node pool {name} disappeared while provisioning",
                fix="check `gcloud container operations list`",
            )
        if pool.status == "RUNNING":
            display.info(f"node pool {name} is RUNNING after {tick.now():.0f} s")
            return pool
        if pool.status == "ERROR":
            raise PoolInError(
                f"node pool {name} went to ERROR while provisioning",
                fix="teardown deletes it; try another reservation",
            )
        return Pending(f"node pool {name} {pool.status}", pool.status)

    found = wait_until(
        check, interval=poll_seconds, timeout=timeout_s, on_tick=display.waiting, clock=clock
    )
    if isinstance(found, Expired):
        raise TpuTrainerError(
            f"node pool {name} still {found.last.status} after {found.elapsed:.0f} s",
            fix=f"CREATE_NODE_POOL cannot be cancelled: wait, then `tpu-trainer cleanup {run_id}`",
        )
    return found


def last_line(result: CommandResult) -> str:
    lines = [line for line in result.text().splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit {result.code}"
