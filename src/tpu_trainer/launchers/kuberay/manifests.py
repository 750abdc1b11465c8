"""A run on KubeRay, planned: the RayCluster, the ConfigMap with the entry script, and the job.

Pure: everything here is computed from the plan and a few settings. The RayCluster has a head
group (CPU only; it runs the job's driver, the entry script mounted from a ConfigMap) and one TPU
worker group: ``numOfHosts`` = hosts of the slice (KubeRay makes them one multi-host replica),
``replicas`` = slices, each host asking for its chips (``google.com/tpu``) on nodes labelled with
the slice's accelerator and topology. Token authentication is on (``authOptions.mode: token``):
the operator keeps the token in a Secret named after the cluster.

The entry script itself is :mod:`tpu_trainer.launchers.ray.entry`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tpu_trainer.errors import InputError
from tpu_trainer.infra.kube_yaml import KubeDumper
from tpu_trainer.launchers.ray.entry import (
    ENTRY_SCRIPT,
    JOB_ENV,
    TPU_WORKER_ENV,
    entrypoint,
    render_entry,
    submission_id,
    tpu_entry,
)
from tpu_trainer.plan.naming import slug
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.slices import Slice

RAY_VERSION = "2.60.0"
RAYCLUSTER_API = "ray.io/v1"
ENTRY_DIR = "/tpu-trainer"
"""Where the head container mounts the entry script's ConfigMap."""
DASHBOARD_PORT = 8265
WORKER_GROUP = "tpu-group"
NAME_MAX = 40
"""RayCluster names stay short: KubeRay derives ``<name>-head-svc`` and pod names from them."""
TPU_RESOURCE = "google.com/tpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"


@dataclass(frozen=True, slots=True, kw_only=True)
class RaySettings:
    """What a KubeRay run needs beyond the plan."""

    image: str
    """Container image with Ray (``ray[default,train]``) and the training framework."""
    namespace: str = "default"
    service_account: str | None = None
    """Kubernetes service account of the pods (for Workload Identity to the output bucket)."""
    head_cpu: str = "8"
    head_memory: str = "16Gi"
    worker_cpu: str = "8"
    worker_memory: str | None = None
    """Memory request and limit of each TPU host's pod; None leaves the node's memory to it."""
    ray_version: str = RAY_VERSION


# ---- names ------------------------------------------------------------------------------------
def cluster_name(run_id: str, model: str) -> str:
    """``tpt-<run>-<model>``: a valid RayCluster name, at most :data:`NAME_MAX` characters."""
    return f"tpt-{run_id}-{slug(model)}"[:NAME_MAX].rstrip("-")


def head_service(name: str) -> str:
    """The head's Service, as KubeRay names it."""
    return f"{name}-head-svc"


def entry_configmap_name(name: str) -> str:
    return f"{name}-entry"


def entry_path() -> str:
    return f"{ENTRY_DIR}/{ENTRY_SCRIPT}"


# ---- the Kubernetes objects ---------------------------------------------------------------------
def entry_configmap(name: str, namespace: str, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": entry_configmap_name(name),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "tpu-trainer"},
        },
        "data": {ENTRY_SCRIPT: script},
    }


def _env(values: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _head_group(name: str, settings: RaySettings) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "ray-head",
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [
            {"containerPort": 6379, "name": "gcs-server"},
            {"containerPort": DASHBOARD_PORT, "name": "dashboard"},
            {"containerPort": 10001, "name": "client"},
        ],
        "resources": {
            "requests": {"cpu": settings.head_cpu, "memory": settings.head_memory},
            "limits": {"memory": settings.head_memory},
        },
        "env": _env(JOB_ENV),
        "volumeMounts": [{"name": "entry", "mountPath": ENTRY_DIR, "readOnly": True}],
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "entry", "configMap": {"name": entry_configmap_name(name)}}],
    }
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    return {"rayStartParams": {}, "template": {"spec": spec}}


def _worker_group(slc: Slice, num_slices: int, settings: RaySettings) -> dict[str, Any]:
    chips = str(slc.chips_per_host)
    requests: dict[str, str] = {"cpu": settings.worker_cpu, TPU_RESOURCE: chips}
    limits: dict[str, str] = {TPU_RESOURCE: chips}
    if settings.worker_memory:
        requests["memory"] = limits["memory"] = settings.worker_memory
    container = {
        "name": "ray-worker",
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": requests, "limits": limits},
        "env": _env({**TPU_WORKER_ENV, **JOB_ENV}),
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "nodeSelector": {
            ACCELERATOR_LABEL: slc.accelerator.gke_accelerator,
            TOPOLOGY_LABEL: slc.topology_name,
        },
    }
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    return {
        "groupName": WORKER_GROUP,
        "replicas": num_slices,
        "minReplicas": num_slices,
        "maxReplicas": num_slices,
        "numOfHosts": slc.hosts,
        "rayStartParams": {},
        "template": {"spec": spec},
    }


def raycluster(
    name: str, slc: Slice, num_slices: int, settings: RaySettings, run_id: str
) -> dict[str, Any]:
    """The RayCluster: a CPU head and one worker group of ``num_slices`` multi-host TPU slices."""
    if not slc.accelerator.gke_accelerator:
        raise InputError(
            f"{slc.device_type} has no GKE TPU node label to schedule Ray workers on",
            fix="use a TPU device type, or train on this machine with `tpu-trainer train`",
        )
    return {
        "apiVersion": RAYCLUSTER_API,
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {"app.kubernetes.io/managed-by": "tpu-trainer", "tpu-trainer/run": run_id},
        },
        "spec": {
            "rayVersion": settings.ray_version,
            "authOptions": {"mode": "token"},
            "headGroupSpec": _head_group(name, settings),
            "workerGroupSpecs": [_worker_group(slc, num_slices, settings)],
        },
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeRayPlan:
    """Everything a KubeRay run creates and submits."""

    name: str
    namespace: str
    cluster: dict[str, Any]
    configmap: dict[str, Any]
    entry_script: str
    entrypoint: str
    submission_id: str
    job_env: Mapping[str, str]

    @property
    def objects(self) -> Sequence[dict[str, Any]]:
        """In the order they are applied: the script first, then the cluster that mounts it."""
        return (self.configmap, self.cluster)


def kuberay_plan(plan: Plan, settings: RaySettings, run_id: str) -> KubeRayPlan:
    """The RayCluster, the entry ConfigMap and the job of one run of ``plan`` (pure)."""
    name = cluster_name(run_id, plan.model)
    script = render_entry(tpu_entry(plan, run_id))
    return KubeRayPlan(
        name=name,
        namespace=settings.namespace,
        cluster=raycluster(name, plan.slice, plan.num_slices, settings, run_id),
        configmap=entry_configmap(name, settings.namespace, script),
        entry_script=script,
        entrypoint=entrypoint("python", entry_path()),
        submission_id=submission_id(run_id),
        job_env=dict(JOB_ENV),
    )


class _BlockDumper(KubeDumper):
    """YAML with multi-line strings (the entry script) as ``|`` blocks, readable as written."""


def _text(dumper: KubeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _text)


def manifest_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """The objects as one multi-document YAML file (what ``kubectl apply -f`` takes)."""
    return yaml.dump_all(
        [dict(o) for o in objects], Dumper=_BlockDumper, sort_keys=False, width=100
    )


def image_of(manifests: str) -> str | None:
    """The image of the head in a run's kept ``raycluster.yaml`` (:func:`manifest_yaml`), the
    one ``train --ray-image`` gave; None when the file holds no RayCluster with one."""
    try:
        objects = list(yaml.safe_load_all(manifests))
    except yaml.YAMLError:
        return None
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("kind") != "RayCluster":
            continue
        head = obj.get("spec", {}).get("headGroupSpec", {}).get("template", {}).get("spec", {})
        image = next((c.get("image") for c in head.get("containers", [])), None)
        return image if isinstance(image, str) and image else None
    return None
