"""The scenario a fake cloud starts from: a YAML file, checked by its schema (pydantic
dataclasses, :mod:`schema`) into frozen dataclasses.

Every problem names the file and the key (``scenario.yaml: reservations[1].status: ...``) and
raises :class:`tpu_trainer.errors.ConfigError`. Unknown keys are errors too, so a typo never
silently turns a failure mode off. ``docs/simulated-cloud.md`` documents every key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Self

import yaml
from pydantic import BeforeValidator, TypeAdapter, ValidationError, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud.maxtext_log import DEFAULT_LOG
from tpu_trainer.fakecloud.ray_scenario import RayScenario
from tpu_trainer.fakecloud.schema import (
    AnyText,
    Count,
    Flag,
    MaybeCount,
    MaybeFlag,
    MaybeText,
    Names,
    Seconds,
    Text,
    at_least,
    base_dir,
    items,
    keys,
    mapping,
    numbers,
    one_of,
    problem,
    scenario_error,
    text_or_file,
)
from tpu_trainer.fakecloud.tpu_vm_scenario import TpuVmScenario

DATAPATHS = ("ADVANCED_DATAPATH", "LEGACY_DATAPATH")
NODE_VERSION = "1.34.1-gke.1829001"
POOL_STATUSES = ("RUNNING", "PROVISIONING", "RECONCILING", "STOPPING", "ERROR")
RESERVATION_STATUSES = ("READY", "CREATING", "DELETING", "INVALID", "UPDATING")
"""Compute's own values of a reservation's ``status`` (its health is apart: ``health``)."""
RESERVATION_HEALTH = ("HEALTHY", "DEGRADED")
CAPACITIES = ("ok", "exhausted")
DEFAULT_ACCOUNT = "trainer@example.com"


def _fields(cls: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: Text
    node_version: Text = NODE_VERSION
    datapath: Annotated[str, BeforeValidator(one_of(DATAPATHS))] = "ADVANCED_DATAPATH"
    multi_networking: Flag = True
    exists: Flag = True

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, _fields(cls), required=("name",))


@dataclass(frozen=True, slots=True)
class PoolSpec:
    name: Text
    machine_type: Text
    node_count: Annotated[int, BeforeValidator(at_least(1))]
    zone: Text
    status: Annotated[str, BeforeValidator(one_of(POOL_STATUSES))] = "RUNNING"
    tpu_topology: MaybeText = None
    placement_policy: MaybeText = None
    reservation: MaybeText = None
    """Reservation the pool's hosts are counted against (deleting it gives them back)."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, _fields(cls), required=("name", "machine_type", "node_count", "zone"))


def _reservation_status(value: Any) -> str:
    if value == "DEGRADED":
        raise problem(
            "DEGRADED is a health, not a status: write `health: DEGRADED` (status takes "
            f"{', '.join(RESERVATION_STATUSES)})"
        )
    return one_of(RESERVATION_STATUSES)(value)


@dataclass(frozen=True, slots=True)
class ReservationSpec:
    name: Text
    zone: Text
    host_count: Annotated[int, BeforeValidator(at_least(1))]
    status: Annotated[str, BeforeValidator(_reservation_status)] = "READY"
    health: Annotated[str, BeforeValidator(one_of(RESERVATION_HEALTH))] = "HEALTHY"
    """``resourceStatus.healthInfo.healthStatus``: DEGRADED while blocks are in maintenance."""
    degraded_blocks: Count | None = None
    """``healthInfo.degradedBlockCount``; 1 when ``health`` is DEGRADED and this is not given."""
    in_use_hosts: Count = 0
    capacity: Annotated[str, BeforeValidator(one_of(CAPACITIES))] = "ok"
    """``exhausted``: every create using the reservation fails with RESOURCE_EXHAUSTED."""
    machine_type: MaybeText = None
    """When set, a pool of another machine type is refused (incorrect for the resources)."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, _fields(cls), required=("name", "zone", "host_count"))

    @property
    def degraded_block_count(self) -> int:
        if self.degraded_blocks is not None:
            return self.degraded_blocks
        return 1 if self.health == "DEGRADED" else 0

    @model_validator(mode="after")
    def _hosts(self) -> Self:
        if self.in_use_hosts > self.host_count:
            raise problem(
                f"{self.in_use_hosts} exceeds host_count {self.host_count}", "in_use_hosts"
            )
        return self


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: Text
    accelerator_topology: MaybeText = None
    """Read from a ``<device>-<topology>-placement-policy`` name when not given."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        if isinstance(data, str) and data:
            return {"name": data}
        return keys(data, _fields(cls), required=("name",))


@dataclass(frozen=True, slots=True)
class Behaviours:
    provisioning_polls: Count = 0
    error_pools: Flag = False
    conflict_on_create: Names = ()
    create_seconds: Seconds = 0.0
    """How long a node pool's create operation runs (wall clock): the pool is PROVISIONING
    meanwhile, whatever happens to the client, and cannot be deleted."""
    lost_pool_deletes: Count = 0
    """This many node pool deletes answer success but leave the pool as it was."""
    workload_create_fails_after_submit: Flag = False
    """The cluster's API server makes the JobSet of a create, then the connection drops before
    its answer: kubectl fails, so ``xpk workload create`` fails (exit 1) with the JobSet made
    (the gcluster stand-in fails the same way after making it)."""
    missing_images: Names = ()
    """Images (``gcr.io/P/NAME`` or ``...:TAG``) the emulated registry does not hold: xpk's
    check of the workload's image fails."""
    kube_forbidden: Names = ()
    """Resources (``priorityclasses.scheduling.k8s.io``, ``configmaps``...) the scenario's
    account may read but not write in the cluster: every write is RBAC's 403 Forbidden."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, _fields(cls), optional=True)


def _cluster_queue(value: Any) -> dict[str, int] | None:
    if value is None:
        return None
    queue = keys(value, ("flavors",))
    flavors = queue.get("flavors")
    return {} if flavors is None else numbers(flavors, "flavors")


def _configmap(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    for key, item in mapping(value).items():
        if not isinstance(item, str | int) or isinstance(item, bool):
            raise problem(f"expected a string or number, got {item!r}", str(key))
    return {str(k): str(v) for k, v in value.items()}


def _in_use(value: Any) -> dict[str, int] | None:
    return None if value is None else numbers(value)


@dataclass(frozen=True, slots=True)
class KueueSpec:
    resource_flavors: Names = ()
    cluster_queue: Annotated[Mapping[str, int] | None, BeforeValidator(_cluster_queue)] = None
    """Flavor name -> ``google.com/tpu`` quota; None: no ClusterQueue ``cluster-queue``."""
    configmap: Annotated[Mapping[str, str] | None, BeforeValidator(_configmap)] = None
    """Data of ``<cluster>-resources-configmap``; None: the map does not exist."""
    local_queue: MaybeFlag = None
    """Whether LocalQueue ``multislice-queue`` exists; None: when ``cluster_queue`` is given."""
    in_use: Annotated[Mapping[str, int] | None, BeforeValidator(_in_use)] = None
    """Flavor name -> ``google.com/tpu`` quota other workloads already hold (Kueue then admits
    a workload only when the rest of the flavor's quota covers it)."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, _fields(cls), optional=True)


def _maybe_count(value: Any) -> int | None:
    return None if value is None else at_least(0)(value)


def _log(value: Any) -> str:
    if not isinstance(value, str):
        raise problem("expected text")
    return value


def _hang_worker(data: Any) -> Any:
    """``hang_after_step: {step: N, worker: W}`` read as ``hang_after_step: N`` and
    ``hang_worker: W``."""
    if not isinstance(data, dict) or not isinstance(data.get("hang_after_step"), dict):
        return data
    hang = keys(data["hang_after_step"], ("step", "worker"), required=("step",))
    return {**data, "hang_after_step": hang["step"], "hang_worker": hang.get("worker", 0)}


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    exit_code: Count = 0
    log: Annotated[str, BeforeValidator(_log)] = DEFAULT_LOG
    pending_polls: Count = 0
    running_polls: Count = 1
    hang: Flag = False
    """True: the workload never finishes (waiting ends in a timeout, exit 124)."""
    hang_after_step: MaybeCount = None
    """Worker 0 stops logging after this step's line and the workload never finishes: its
    ``kubectl logs -f`` stays open, silent, until it is stopped. Also written
    ``{step: N, worker: W}``: then every host prints the step lines, host W (of slice 0)
    went quiet first (its log ends at step N - 1) and the others stop after step N."""
    hang_worker: Count = 0
    """The host that went quiet first (``hang_after_step``'s ``worker``)."""
    other_hosts_log: AnyText = None
    """What the other hosts print (default: one line saying worker 0 logs the metrics)."""
    tpus_taken: Flag = False
    """Other pods hold the TPUs of every matching node: the scheduler never places the pods
    (PodScheduled False, ``Insufficient google.com/tpu``)."""
    reclaim_after_step: Annotated[int | None, BeforeValidator(_maybe_count)] = None
    """The slice is reclaimed after this step: worker 0 logs MaxText's SIGTERM stop and the
    workload exits 0, its pods get a DisruptionTarget condition, its node pools go and their
    reservations have no room left. The run's next workload restores the last durable
    checkpoint (every ``checkpoint_period`` of the command) and reaches the last step. On
    KubeRay the fake Ray dashboard plays it (``ray_dashboard.reclaimed_jobs``)."""
    parallel_containers: MaybeFlag = None
    """Containers per pod: None follows seed 001 (``jax-tpu`` on one host, ``jax-tpu-1`` and
    ``jax-tpu-2`` on multi-host slices); True/False force two/one for TPU v7 4-chip hosts."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any, info: ValidationInfo) -> Any:
        data = _hang_worker(
            keys(
                data,
                (
                    "exit_code",
                    "log",
                    "log_file",
                    "pending_polls",
                    "running_polls",
                    "hang",
                    "hang_after_step",
                    "parallel_containers",
                    "other_hosts_log",
                    "tpus_taken",
                    "reclaim_after_step",
                ),
                optional=True,
            )
        )
        return text_or_file(data, "log", base_dir(info)) if isinstance(data, dict) else data


@dataclass(frozen=True, slots=True)
class Latencies:
    describe: Seconds = 0.0
    list: Seconds = 0.0
    default: Seconds = 0.0

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(data, ("describe", "list", "default"), optional=True)


def _project_number(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit():
        raise problem(f"expected the project's number (digits), got {value!r}")
    return text


_Pools = Annotated[tuple[PoolSpec, ...], BeforeValidator(items)]
_Reservations = Annotated[tuple[ReservationSpec, ...], BeforeValidator(items)]
_Policies = Annotated[tuple[PolicySpec, ...], BeforeValidator(items)]


@dataclass(frozen=True, slots=True)
class Scenario:
    project: Text
    region: Text
    cluster: ClusterSpec
    node_pools: _Pools = ()
    reservations: _Reservations = ()
    resource_policies: _Policies = ()
    behaviours: Behaviours = field(default_factory=Behaviours)
    kueue: KueueSpec = field(default_factory=KueueSpec)
    workloads: WorkloadSpec = field(default_factory=WorkloadSpec)
    latencies: Latencies = field(default_factory=Latencies)
    tpu_vm: TpuVmScenario = field(default_factory=TpuVmScenario)
    ray: RayScenario = field(default_factory=RayScenario)
    """The Ray head of a RayCluster the tool makes (KubeRay rehearsals)."""
    project_number: Annotated[str | None, BeforeValidator(_project_number)] = None
    """The project's number (Resource Manager's ``projectNumber``); None: twelve digits made
    from ``project``."""
    account: MaybeText = DEFAULT_ACCOUNT
    """gcloud's active account; None: not logged in (every command but ``auth``/``config``
    fails with gcloud's "You do not currently have an active account selected")."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        data = keys(data, _fields(cls), required=("project", "region"), optional=True)
        if not isinstance(data, dict) or data.get("cluster") is not None:
            return data
        if "tpu_vm" not in data:
            raise problem("required (at least `name`; optional with `tpu_vm`)", "cluster")
        return {**data, "cluster": {"name": "none", "exists": False}}

    @model_validator(mode="after")
    def _unique(self) -> Self:
        pools = [p.name for p in self.node_pools]
        for key, names in (
            ("node_pools", pools),
            ("reservations", [r.name for r in self.reservations]),
        ):
            seen: set[str] = set()
            for i, name in enumerate(names):
                if name in seen:
                    raise problem(f"{name!r} appears twice", f"{key}[{i}].name")
                seen.add(name)
        return self


_SCHEMA = TypeAdapter(Scenario)


def parse_scenario(data: object, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """A scenario from already-loaded YAML data; ``base`` resolves a relative ``log_file``."""
    try:
        return _SCHEMA.validate_python(data, context={"base": base})
    except ValidationError as e:
        raise scenario_error(e, source) from None


def load_scenario(path: Path | str) -> Scenario:
    """Read and check a scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"{path}: cannot read the scenario file: {getattr(e, 'strerror', None) or 'not UTF-8'}",
            fix="give the path of a scenario YAML file (see docs/simulated-cloud.md)",
        ) from None
    from tpu_trainer.config.load import refuse_aliases

    refuse_aliases(text, str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}", fix="fix the YAML syntax") from None
    return parse_scenario(data, str(path), path.parent)
