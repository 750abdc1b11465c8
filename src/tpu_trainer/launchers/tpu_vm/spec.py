"""A TPU VM, planned without side effects: which runtime image, and the exact gcloud argv to
create, describe, reach and delete it.

``gcloud compute tpus tpu-vm`` and ``queued-resources`` exist in GA and alpha only, so every
argv here is GA. A TPU VM of one slice has one worker (host) per four chips; ``tpu-vm ssh
--worker=all --command=... --output-directory=DIR`` runs a command on all of them at once and
writes worker N's output to ``DIR/N.log``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.plan.naming import slug
from tpu_trainer.plan.slices import Slice

VM_NAME_MAX = 40
VM_PREFIX = "tpt-"
"""TPU VMs the tool creates are named ``tpt-<run>-<model>``, like its node pools."""

BASE_IMAGES = frozenset({"tpu-ubuntu2204-base", "tpu-vm-base"})
"""Plain OS images: no TPU runtime tuned for the newer families."""
_FAMILY_IMAGE_ONLY = frozenset({Family.V6E})
"""Families JAX cannot use on a base image ("Failed to get global TPU topology", seed 002)."""


class Provisioning(StrEnum):
    """How the capacity is paid for."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    """Spot capacity: cheaper, can be taken back at any time."""
    RESERVED = "reserved"
    """The project's reserved TPU capacity."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TpuVmSpec:
    """One TPU VM to create for one run."""

    name: str
    project: str
    zone: str
    slice: Slice
    runtime_version: str
    """``--version`` (``--runtime-version`` for a queued resource)."""
    provisioning: Provisioning = Provisioning.ON_DEMAND
    queued: bool = False
    """Ask through a queued resource instead of creating the VM at once."""

    @property
    def accelerator_type(self) -> str:
        return self.slice.tpu_vm_accelerator_type

    @property
    def workers(self) -> int:
        """Hosts of the slice: one ``tpu-vm ssh`` worker each."""
        return self.slice.hosts

    @property
    def queued_resource(self) -> str:
        """The queued resource's name (when ``queued``)."""
        return f"{self.name}-qr"


def vm_name(run_id: str, model: str) -> str:
    """``tpt-<first 8 of run id>-<model>``: valid as a TPU node id, at most 40 characters."""
    text = f"{VM_PREFIX}{run_id[:8]}-{slug(model) or 'run'}"
    return text[:VM_NAME_MAX].rstrip("-")


def runtime_version(slice: Slice, requested: str | None = None) -> str:
    """The runtime image for ``slice``: the family's own (catalog) unless ``requested``; a base
    image is refused where JAX cannot use it."""
    acc = slice.accelerator
    if acc.tpu_vm_runtime is None:
        raise InputError(
            f"{acc.name} is not offered as a TPU VM by the Cloud TPU API",
            fix="run it on GKE (`tpu-trainer train` without the TPU VM launcher)",
        )
    version = requested or acc.tpu_vm_runtime
    if version in BASE_IMAGES and slice.family in _FAMILY_IMAGE_ONLY:
        raise InputError(
            f"runtime version {version} is a base image: JAX on {acc.name} cannot see the "
            f'TPUs with it ("Failed to get global TPU topology")',
            fix=f"use --version={acc.tpu_vm_runtime}, the {slice.accelerator.xpk_prefix} runtime",
        )
    return version


def tpu_vm_spec(
    *,
    run_id: str,
    model: str,
    project: str,
    zone: str,
    slice: Slice,
    runtime: str | None = None,
    provisioning: Provisioning = Provisioning.ON_DEMAND,
    queued: bool = False,
) -> TpuVmSpec:
    """The TPU VM of one run: its name from the run id, its runtime checked for the slice."""
    if not project or not zone:
        raise InputError(
            "a TPU VM needs a project and a zone",
            fix="set project_id and default_zone in the configuration (`tpu-trainer config init`)",
        )
    return TpuVmSpec(
        name=vm_name(run_id, model),
        project=project,
        zone=zone,
        slice=slice,
        runtime_version=runtime_version(slice, runtime),
        provisioning=provisioning,
        queued=queued,
    )


# ---- argv ------------------------------------------------------------------------------------
def _where(spec: TpuVmSpec) -> list[str]:
    return [f"--zone={spec.zone}", f"--project={spec.project}"]


def create_argv(spec: TpuVmSpec) -> list[str]:
    """``gcloud compute tpus tpu-vm create`` (or ``queued-resources create`` when queued)."""
    if spec.queued:
        return [
            "gcloud",
            "compute",
            "tpus",
            "queued-resources",
            "create",
            spec.queued_resource,
            f"--node-id={spec.name}",
            f"--accelerator-type={spec.accelerator_type}",
            f"--runtime-version={spec.runtime_version}",
            *_where(spec),
            *_capacity_flags(spec.provisioning),
        ]
    return [
        "gcloud",
        "compute",
        "tpus",
        "tpu-vm",
        "create",
        spec.name,
        f"--accelerator-type={spec.accelerator_type}",
        f"--version={spec.runtime_version}",
        *_where(spec),
        *_capacity_flags(spec.provisioning),
    ]


def _capacity_flags(provisioning: Provisioning) -> list[str]:
    if provisioning is Provisioning.RESERVED:
        return ["--reserved"]
    if provisioning is Provisioning.SPOT:
        # GA ``tpu-vm create`` and ``queued-resources create`` both take --spot (gcloud 528's
        # parser); --preemptible is the older, 24-hour kind of capacity.
        return ["--spot"]
    return []


def _tpus(group: str, verb: str, name: str, zone: str, project: str, *flags: str) -> list[str]:
    """``gcloud compute tpus <group> <verb> NAME --zone --project [flags]``."""
    return [
        "gcloud",
        "compute",
        "tpus",
        group,
        verb,
        name,
        f"--zone={zone}",
        f"--project={project}",
        *flags,
    ]


def describe_argv(name: str, zone: str, project: str) -> list[str]:
    return _tpus("tpu-vm", "describe", name, zone, project, "--format=json")


def queued_describe_argv(name: str, zone: str, project: str) -> list[str]:
    return _tpus("queued-resources", "describe", name, zone, project, "--format=json")


def delete_argv(name: str, zone: str, project: str) -> list[str]:
    return _tpus("tpu-vm", "delete", name, zone, project, "--quiet")


def queued_delete_argv(name: str, zone: str, project: str) -> list[str]:
    """Delete a queued resource and any node it still holds (``--force``)."""
    return _tpus("queued-resources", "delete", name, zone, project, "--force", "--quiet")


def ssh_argv(
    spec: TpuVmSpec, command: str, output_dir: str, send_env: Sequence[str] = ()
) -> list[str]:
    """Run ``command`` on every worker, worker N's output into ``output_dir/N.log``.

    ``send_env`` names variables of gcloud's own environment that ssh passes to the workers
    (``SendEnv``; the VM's sshd must accept them): their values never appear in an argv.
    """
    flags = [f"--ssh-flag=-o SendEnv={name}" for name in send_env]
    return [
        "gcloud",
        "compute",
        "tpus",
        "tpu-vm",
        "ssh",
        spec.name,
        *_where(spec),
        "--worker=all",
        f"--command={command}",
        f"--output-directory={output_dir}",
        *flags,
    ]


def scp_argv(spec: TpuVmSpec, files: Sequence[str], remote_dir: str) -> list[str]:
    """Copy local ``files`` into ``remote_dir`` (relative to the home folder) on every worker."""
    return [
        "gcloud",
        "compute",
        "tpus",
        "tpu-vm",
        "scp",
        *files,
        f"{spec.name}:{remote_dir}/",
        *_where(spec),
        "--worker=all",
    ]


# ---- what describe answers --------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class TpuNode:
    """``tpu-vm describe --format=json``, the fields a run needs."""

    name: str
    """The node id (last part of ``projects/P/locations/Z/nodes/NAME``)."""
    state: str
    """CREATING, READY, REPAIRING, STOPPED, DELETING, PREEMPTED, TERMINATED..."""
    accelerator_type: str
    runtime_version: str
    workers: tuple[str, ...]
    """Each worker's internal IP, in worker order."""
    health: str


def parse_node(obj: dict[str, Any]) -> TpuNode:
    endpoints = obj.get("networkEndpoints") or []
    return TpuNode(
        name=str(obj.get("name", "")).rsplit("/", 1)[-1],
        state=str(obj.get("state", "")),
        accelerator_type=str(obj.get("acceleratorType", "")),
        runtime_version=str(obj.get("runtimeVersion", "")),
        workers=tuple(str(e.get("ipAddress", "")) for e in endpoints),
        health=str(obj.get("health", "")),
    )


def queued_state(obj: dict[str, Any]) -> str:
    """``state.state`` of a queued resource: WAITING_FOR_RESOURCES, PROVISIONING, ACTIVE, FAILED,
    SUSPENDING, SUSPENDED (older APIs: ACCEPTED)."""
    state = obj.get("state") or {}
    return str(state.get("state", "")) if isinstance(state, dict) else str(state)


def load_json(text: str, argv: Sequence[str]) -> dict[str, Any]:
    """A describe's JSON object, or a clear error."""
    try:
        data = json.loads(text or "null")
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise TpuTrainerError(
            f"`{' '.join(argv[:5])}` did not answer a JSON object: {text[:200]!r}",
            fix="check the gcloud installation (`gcloud --version`)",
        )
    return data


# States from which a VM will not become READY by waiting.
DEAD_STATES = frozenset({"STOPPED", "STOPPING", "DELETING", "PREEMPTED", "TERMINATED", "HIDDEN"})
QUEUED_DEAD = frozenset({"FAILED", "SUSPENDING", "SUSPENDED"})
