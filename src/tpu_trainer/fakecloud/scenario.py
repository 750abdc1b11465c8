"""The scenario a fake cloud starts from: a YAML file, parsed into frozen dataclasses.

Every problem names the file and the key (``scenario.yaml: reservations[1].status: ...``) and
raises :class:`tpu_trainer.errors.ConfigError`. Unknown keys are errors too, so a typo never
silently turns a failure mode off. ``docs/fake-cloud.md`` documents every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud.tpu_vm_scenario import TpuVmScenario, parse_tpu_vm
from tpu_trainer.fakecloud.yaml_node import YamlNode as _Node

DATAPATHS = ("ADVANCED_DATAPATH", "LEGACY_DATAPATH")
NODE_VERSION = "1.34.1-gke.1829001"
POOL_STATUSES = ("RUNNING", "PROVISIONING", "RECONCILING", "STOPPING", "ERROR")
RESERVATION_STATUSES = ("READY", "DEGRADED", "CREATING", "DELETING", "UPDATING")
CAPACITIES = ("ok", "exhausted")
DEFAULT_ACCOUNT = "trainer@example.com"

DEFAULT_LOG = """\
I1122 04:27:31.120000 139872 max_utils.py:273] Num_devices: 8
I1122 04:27:35.410000 139872 train.py:112] number parameters: 8.030 billion
I1122 04:29:46.380500 139872 metric_logger.py:265] completed step: 0, seconds: 125.311, \
TFLOP/s/device: 0.054, Tokens/s/device: 941.329, total_weights: 65536, loss: 10.937, \
lm_loss: 10.937, perplexity: 56244.406
I1122 04:29:49.101200 139872 metric_logger.py:265] completed step: 1, seconds: 2.720, \
TFLOP/s/device: 801.100, Tokens/s/device: 6024.110, total_weights: 65536, loss: 10.412, \
lm_loss: 10.412, perplexity: 33251.120
I1122 04:29:51.790100 139872 metric_logger.py:265] completed step: 2, seconds: 2.688, \
TFLOP/s/device: 810.640, Tokens/s/device: 6095.870, total_weights: 65536, loss: 9.870, \
lm_loss: 9.870, perplexity: 19341.700
"""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    node_version: str = NODE_VERSION
    datapath: str = "ADVANCED_DATAPATH"
    multi_networking: bool = True
    exists: bool = True


@dataclass(frozen=True, slots=True)
class PoolSpec:
    name: str
    machine_type: str
    node_count: int
    zone: str
    status: str = "RUNNING"
    tpu_topology: str | None = None
    placement_policy: str | None = None
    reservation: str | None = None
    """Reservation the pool's hosts are counted against (deleting it gives them back)."""


@dataclass(frozen=True, slots=True)
class ReservationSpec:
    name: str
    zone: str
    host_count: int
    status: str = "READY"
    in_use_hosts: int = 0
    capacity: str = "ok"
    """``exhausted``: every create using the reservation fails with RESOURCE_EXHAUSTED."""
    machine_type: str | None = None
    """When set, a pool of another machine type is refused (incorrect for the resources)."""


@dataclass(frozen=True, slots=True)
class PolicySpec:
    name: str
    accelerator_topology: str | None = None
    """Read from a ``<device>-<topology>-placement-policy`` name when not given."""


@dataclass(frozen=True, slots=True)
class Behaviours:
    xpk_memory_limit_bug: bool = False
    provisioning_polls: int = 0
    error_pools: bool = False
    conflict_on_create: tuple[str, ...] = ()
    xpk_adapt_creates_node_pools: bool = False
    """xpk 1.16.0's ``cluster adapt`` creates no node pools (only ``cluster create`` does);
    older xpk (the seed's) did. True follows the seed."""
    create_seconds: float = 0.0
    """How long a node pool's create operation runs (wall clock): the pool is PROVISIONING
    meanwhile, whatever happens to the client, and cannot be deleted."""
    lost_pool_deletes: int = 0
    """This many node pool deletes answer success but leave the pool as it was."""
    workload_create_fails_after_submit: bool = False
    """``xpk workload create`` creates the JobSet, then fails (exit 1)."""


@dataclass(frozen=True, slots=True)
class KueueSpec:
    resource_flavors: tuple[str, ...] = ()
    cluster_queue: Mapping[str, int] | None = None
    """Flavor name -> ``google.com/tpu`` quota; None: no ClusterQueue ``cluster-queue``."""
    configmap: Mapping[str, str] | None = None
    """Data of ``<cluster>-resources-configmap``; None: the map does not exist."""
    local_queue: bool | None = None
    """Whether LocalQueue ``multislice-queue`` exists; None: when ``cluster_queue`` is given."""
    in_use: Mapping[str, int] | None = None
    """Flavor name -> ``google.com/tpu`` quota other workloads already hold (Kueue then admits
    a workload only when the rest of the flavor's quota covers it)."""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    exit_code: int = 0
    log: str = DEFAULT_LOG
    pending_polls: int = 0
    running_polls: int = 1
    hang: bool = False
    """True: the workload never finishes (waiting ends in a timeout, exit 124)."""
    other_hosts_log: str | None = None
    """What the other hosts print (default: one line saying worker 0 logs the metrics)."""
    tpus_taken: bool = False
    """Other pods hold the TPUs of every matching node: the scheduler never places the pods
    (PodScheduled False, ``Insufficient google.com/tpu``)."""
    parallel_containers: bool | None = None
    """Containers per pod: None follows seed 001 (``jax-tpu`` on one host, ``jax-tpu-1`` and
    ``jax-tpu-2`` on multi-host slices); True/False force two/one for TPU v7 4-chip hosts."""


@dataclass(frozen=True, slots=True)
class Latencies:
    describe: float = 0.0
    list: float = 0.0
    default: float = 0.0


@dataclass(frozen=True, slots=True)
class Scenario:
    project: str
    region: str
    cluster: ClusterSpec
    node_pools: tuple[PoolSpec, ...] = ()
    reservations: tuple[ReservationSpec, ...] = ()
    resource_policies: tuple[PolicySpec, ...] = ()
    behaviours: Behaviours = field(default_factory=Behaviours)
    kueue: KueueSpec = field(default_factory=KueueSpec)
    workloads: WorkloadSpec = field(default_factory=WorkloadSpec)
    latencies: Latencies = field(default_factory=Latencies)
    tpu_vm: TpuVmScenario = field(default_factory=TpuVmScenario)
    account: str | None = DEFAULT_ACCOUNT
    """gcloud's active account; None: not logged in (every command but ``auth``/``config``
    fails with gcloud's "You do not currently have an active account selected")."""


def _cluster(node: _Node) -> ClusterSpec:
    node.only("name", "node_version", "datapath", "multi_networking", "exists")
    return ClusterSpec(
        name=node.text("name"),
        node_version=node.text("node_version", NODE_VERSION),
        datapath=node.text("datapath", DATAPATHS[0], choices=DATAPATHS),
        multi_networking=node.flag("multi_networking", True),
        exists=node.flag("exists", True),
    )


def _pool(node: _Node) -> PoolSpec:
    node.only(*PoolSpec.__dataclass_fields__)
    return PoolSpec(
        name=node.text("name"),
        machine_type=node.text("machine_type"),
        node_count=node.number("node_count", minimum=1),
        zone=node.text("zone"),
        status=node.text("status", "RUNNING", choices=POOL_STATUSES),
        tpu_topology=node.maybe_text("tpu_topology"),
        placement_policy=node.maybe_text("placement_policy"),
        reservation=node.maybe_text("reservation"),
    )


def _reservation(node: _Node) -> ReservationSpec:
    node.only(*ReservationSpec.__dataclass_fields__)
    spec = ReservationSpec(
        name=node.text("name"),
        zone=node.text("zone"),
        host_count=node.number("host_count", minimum=1),
        status=node.text("status", "READY", choices=RESERVATION_STATUSES),
        in_use_hosts=node.number("in_use_hosts", 0),
        capacity=node.text("capacity", "ok", choices=CAPACITIES),
        machine_type=node.maybe_text("machine_type"),
    )
    if spec.in_use_hosts > spec.host_count:
        raise node.error(
            "in_use_hosts", f"{spec.in_use_hosts} exceeds host_count {spec.host_count}"
        )
    return spec


def _policies(node: _Node) -> tuple[PolicySpec, ...]:
    raw = node.data.get("resource_policies") or []
    if not isinstance(raw, list):
        raise node.error("resource_policies", "expected a list")
    out: list[PolicySpec] = []
    for i, item in enumerate(raw):
        if isinstance(item, str) and item:
            out.append(PolicySpec(item))
            continue
        sub = _Node(node.source, f"resource_policies[{i}]", item)
        sub.only("name", "accelerator_topology")
        out.append(PolicySpec(sub.text("name"), sub.maybe_text("accelerator_topology")))
    return tuple(out)


def _behaviours(node: _Node | None) -> Behaviours:
    if node is None:
        return Behaviours()
    node.only(*Behaviours.__dataclass_fields__)
    return Behaviours(
        xpk_memory_limit_bug=node.flag("xpk_memory_limit_bug"),
        provisioning_polls=node.number("provisioning_polls", 0),
        error_pools=node.flag("error_pools"),
        conflict_on_create=node.names("conflict_on_create"),
        xpk_adapt_creates_node_pools=node.flag("xpk_adapt_creates_node_pools", False),
        create_seconds=node.seconds("create_seconds"),
        lost_pool_deletes=node.number("lost_pool_deletes", 0),
        workload_create_fails_after_submit=node.flag("workload_create_fails_after_submit"),
    )


def _kueue(node: _Node | None) -> KueueSpec:
    if node is None:
        return KueueSpec()
    node.only("resource_flavors", "cluster_queue", "configmap", "local_queue", "in_use")
    queue: dict[str, int] | None = None
    cq = node.child("cluster_queue")
    if cq is not None:
        cq.only("flavors")
        flavors = cq.child("flavors")
        queue = {} if flavors is None else {k: flavors.number(k) for k in flavors.data}
    configmap: dict[str, str] | None = None
    cm = node.child("configmap")
    if cm is not None:
        for key, value in cm.data.items():
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise cm.error(str(key), f"expected a string or number, got {value!r}")
        configmap = {str(k): str(v) for k, v in cm.data.items()}
    local = node.data.get("local_queue")
    if local is not None and not isinstance(local, bool):
        raise node.error("local_queue", "expected true, false or null")
    used = node.child("in_use")
    in_use = None if used is None else {k: used.number(k) for k in used.data}
    return KueueSpec(node.names("resource_flavors"), queue, configmap, local, in_use)


def _workloads(node: _Node | None, base: Path | None) -> WorkloadSpec:
    if node is None:
        return WorkloadSpec()
    node.only(
        "exit_code",
        "log",
        "log_file",
        "pending_polls",
        "running_polls",
        "hang",
        "parallel_containers",
        "other_hosts_log",
        "tpus_taken",
    )
    log = node.data.get("log", DEFAULT_LOG)
    if node.data.get("log_file") is not None:
        if "log" in node.data:
            raise node.error("log_file", "give either log or log_file, not both")
        path = Path(node.text("log_file")).expanduser()
        path = path if path.is_absolute() or base is None else base / path
        try:
            log = path.read_text(encoding="utf-8")
        except OSError as e:
            raise node.error("log_file", f"cannot read {path}: {e.strerror}") from None
    if not isinstance(log, str):
        raise node.error("log", "expected text")
    parallel = node.data.get("parallel_containers")
    if parallel is not None and not isinstance(parallel, bool):
        raise node.error("parallel_containers", "expected true, false or null")
    return WorkloadSpec(
        exit_code=node.number("exit_code", 0),
        log=log,
        pending_polls=node.number("pending_polls", 0),
        running_polls=node.number("running_polls", 1),
        hang=node.flag("hang"),
        tpus_taken=node.flag("tpus_taken"),
        parallel_containers=parallel,
        other_hosts_log=_optional_text(node, "other_hosts_log"),
    )


def _optional_text(node: _Node, key: str) -> str | None:
    value = node.data.get(key)
    if value is not None and not isinstance(value, str):
        raise node.error(key, "expected text")
    return value


def _latencies(node: _Node | None) -> Latencies:
    if node is None:
        return Latencies()
    node.only("describe", "list", "default")
    return Latencies(node.seconds("describe"), node.seconds("list"), node.seconds("default"))


def parse_scenario(data: object, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """A scenario from already-loaded YAML data; ``base`` resolves a relative ``log_file``."""
    top = _Node(source, "", data if data is not None else {})
    top.only(
        "project",
        "region",
        "cluster",
        "node_pools",
        "reservations",
        "resource_policies",
        "behaviours",
        "kueue",
        "workloads",
        "latencies",
        "tpu_vm",
        "account",
    )
    cluster = top.child("cluster")
    if cluster is None and "tpu_vm" in top.data:
        cluster = _Node(top.source, "cluster", {"name": "none", "exists": False})
    if cluster is None:
        raise top.error("cluster", "required (at least `name`; optional with `tpu_vm`)")
    scenario = Scenario(
        project=top.text("project"),
        region=top.text("region"),
        cluster=_cluster(cluster),
        node_pools=tuple(_pool(n) for n in top.items("node_pools")),
        reservations=tuple(_reservation(n) for n in top.items("reservations")),
        resource_policies=_policies(top),
        behaviours=_behaviours(top.child("behaviours")),
        kueue=_kueue(top.child("kueue")),
        workloads=_workloads(top.child("workloads"), base),
        latencies=_latencies(top.child("latencies")),
        tpu_vm=parse_tpu_vm(top.child("tpu_vm"), base),
        account=_account(top),
    )
    _check_unique(top, "node_pools", [p.name for p in scenario.node_pools])
    _check_unique(top, "reservations", [r.name for r in scenario.reservations])
    return scenario


def _account(top: _Node) -> str | None:
    if "account" not in top.data:
        return DEFAULT_ACCOUNT
    return top.maybe_text("account")


def _check_unique(top: _Node, key: str, names: list[str]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise top.error(f"{key}[{i}].name", f"{name!r} appears twice")
        seen.add(name)


def load_scenario(path: Path | str) -> Scenario:
    """Read and check a scenario file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"{path}: cannot read the scenario file: {getattr(e, 'strerror', None) or 'not UTF-8'}",
            fix="give the path of a scenario YAML file (see docs/fake-cloud.md)",
        ) from None
    from tpu_trainer.config.load import refuse_aliases

    refuse_aliases(text, str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}", fix="fix the YAML syntax") from None
    return parse_scenario(data, str(path), path.parent)
