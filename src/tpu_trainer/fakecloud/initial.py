"""The state a scenario starts the fake cloud in."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.k8s import initial_objects
from tpu_trainer.fakecloud.scenario import Scenario
from tpu_trainer.fakecloud.state import (
    STATE_VERSION,
    State,
    default_project_number,
    new_policy,
    new_pool,
    write_state,
)
from tpu_trainer.fakecloud.tpu_vm_nodes import initial_tpu_vms

_POLICY_TOPOLOGY = re.compile(r"-(\d+x\d+(?:x\d+)?)-placement-policy$")


def init_state(scenario: Scenario, path: Path | str) -> Path:
    """Write the scenario's starting state to ``path`` (replacing any state there)."""
    return write_state(path, initial_state(scenario))


def policy_topology(name: str) -> str | None:
    """``4x4x8`` from ``tpu7x-256-4x4x8-placement-policy``."""
    m = _POLICY_TOPOLOGY.search(name)
    return m.group(1) if m else None


def initial_state(scenario: Scenario) -> State:
    """The state a scenario starts in (plain JSON data)."""
    cluster = scenario.cluster
    pools = {
        p.name: new_pool(
            p.name,
            machine_type=p.machine_type,
            node_count=p.node_count,
            zone=p.zone,
            status=p.status,
            version=cluster.node_version,
            tpu_topology=p.tpu_topology,
            placement_policy=p.placement_policy,
            reservation=p.reservation,
        )
        for p in scenario.node_pools
    }
    return {
        "version": STATE_VERSION,
        "project": scenario.project,
        "project_number": scenario.project_number or default_project_number(scenario.project),
        "region": scenario.region,
        "account": scenario.account,
        "cluster": {
            "name": cluster.name,
            "node_version": cluster.node_version,
            "datapath": cluster.datapath,
            "multi_networking": cluster.multi_networking,
            "exists": cluster.exists,
        },
        "node_pools": pools,
        "reservations": {
            r.name: {
                "name": r.name,
                "zone": r.zone,
                "status": r.status,
                "health": r.health,
                "degraded_blocks": r.degraded_block_count,
                "host_count": r.host_count,
                "in_use_hosts": r.in_use_hosts,
                "capacity": r.capacity,
                "machine_type": r.machine_type,
            }
            for r in scenario.reservations
        },
        "resource_policies": {
            p.name: new_policy(p.name, p.accelerator_topology or policy_topology(p.name))
            for p in scenario.resource_policies
        },
        "k8s": initial_objects(scenario),
        "kueue_in_use": dict(scenario.kueue.in_use or {}),
        "workloads": {},
        "behaviours": _plain(scenario.behaviours),
        "workload_defaults": _plain(scenario.workloads),
        "latencies": _plain(scenario.latencies),
        **initial_tpu_vms(scenario),
        "seq": 1000,
        "calls": [],
    }


def _plain(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in obj.__dataclass_fields__:
        value = getattr(obj, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out
