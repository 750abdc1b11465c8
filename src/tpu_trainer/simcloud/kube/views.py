"""JobSets, their pods and Kueue's Workloads served from the scenario's workload model.

The objects are not stored: each read builds them from ``state["workloads"]`` with the
workload model's functions (``fakecloud.workloads`` and ``kueue_workloads``, which the xpk
stand-in shares), so a list of JobSets or pods is a read that moves a workload along (Pending,
Running, then its end). A pod read by name (what ``kubectl logs`` does first) looks without
moving anything.

A JobSet created through the API registers a workload as xpk's does (``register``): its slice
from the pod template's TPU node selector, the zone of a matching node pool. The JobSet as
sent is kept beside it (in the store, under the model's uid, the one Kueue labels its Workload
with) and served with the model's status; deleting the JobSet deletes the workload, its pods
and its Workload.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from tpu_trainer.catalog.accelerators import ACCELERATORS
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud import workloads as wls
from tpu_trainer.fakecloud.kueue_workloads import kueue_workload_json
from tpu_trainer.fakecloud.state import State
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.kube.nodes import ACCELERATOR_LABEL, TOPOLOGY_LABEL
from tpu_trainer.simcloud.kube.resources import Resource
from tpu_trainer.simcloud.kube.status import KubeError

Obj = dict[str, Any]
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def kind_of(resource: Resource) -> str:
    """``JobSet``, ``Pod`` or ``Workload`` when the model serves ``resource``; else ``""``."""
    if (resource.group, resource.plural) == ("jobset.x-k8s.io", "jobsets"):
        return "JobSet"
    if (resource.group, resource.plural) == ("", "pods"):
        return "Pod"
    if (resource.group, resource.plural) == ("kueue.x-k8s.io", "workloads"):
        return "Workload"
    return ""


def _uid(text: str) -> str:
    h = hashlib.sha256(text.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _template(wl: Obj) -> Obj:
    """The pod template of the workload's pods (what the CRDs require of a JobSet and a
    Workload; the stand-in leaves it out)."""
    return {"metadata": {"labels": {JOBSET_LABEL: wl["name"]}}, "spec": wls.pod_spec(wl)}


def jobset(state: State, wl: Obj, kept: Obj | None) -> Obj:
    """The JobSet of workload ``wl`` (one read of it): ``kept`` (as it was sent through the
    API) with the model's status, or the model's own JobSet made whole."""
    model = wls.jobset_json(state, wl)
    if kept is None:  # what JobSet's webhook and the CRD's schema add to what xpk sends
        for job in model["spec"]["replicatedJobs"]:
            job["template"]["spec"]["template"] = _template(wl)
        for n, rule in enumerate(model["spec"]["failurePolicy"]["rules"]):
            rule.setdefault("name", f"failurePolicyRule{n}")
        return model
    obj = copy.deepcopy(kept)
    obj["spec"]["suspend"] = model["spec"]["suspend"]
    obj["status"] = model["status"]
    return obj


def workload(state: State, wl: Obj) -> Obj:
    """Kueue's Workload for the JobSet, with the pod template its CRD requires."""
    obj = kueue_workload_json(state, wl)
    obj["metadata"]["uid"] = _uid("workload/" + wl["name"])
    for pod_set in obj["spec"]["podSets"]:
        pod_set["template"] = _template(wl)
    return obj


def peek(state: State, wl: Obj) -> str:
    """The workload's phase now, without reading it (``observe`` without the read)."""
    if wl.get("reclaimed"):
        return wls.phase(wl)
    if wls.kueue_blocker(state, wl) is not None:
        return "Suspended"
    if not wls.schedulable(state, wl):
        return "Unschedulable"
    return wls.phase(wl)


def _with_uid(pod: Obj) -> Obj:
    pod["metadata"]["uid"] = _uid("pod/" + pod["metadata"]["name"])
    return pod


def pods(state: State, jobset: str | None) -> list[Obj]:
    """The pods of every workload (or of the JobSet ``jobset``): a read of each."""
    return [_with_uid(p) for p in wls.pods(state, jobset)]


def pod_of(state: State, name: str) -> tuple[Obj, int, int] | None:
    """(workload, slice, worker) of the model's pod ``name``."""
    for wl in state["workloads"].values():
        for j, i, pod in wls.pod_names(wl):
            if pod == name:
                return wl, j, i
    return None


def pod(state: State, name: str) -> Obj | None:
    """The model's pod ``name`` as it is now (None: not one, or Kueue holds its workload)."""
    found = pod_of(state, name)
    if found is None:
        return None
    wl, j, i = found
    ph = peek(state, wl)
    if ph == "Suspended":
        return None
    return _with_uid(wls.pod_json(state, wl, j, i, name, ph))


# ---- writes -----------------------------------------------------------------------------------
def _slice(obj: Obj) -> tuple[Slice, int, Obj]:
    """The slice a JobSet's pods ask for, its number of slices and its pod spec."""
    jobs = (obj.get("spec") or {}).get("replicatedJobs") or []
    job = jobs[0] if jobs else {}
    spec = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
    spec = spec or {}
    selector = spec.get("nodeSelector") or {}
    accelerator, topology = selector.get(ACCELERATOR_LABEL), selector.get(TOPOLOGY_LABEL)
    family = next((f for f, a in ACCELERATORS.items() if a.gke_accelerator == accelerator), None)
    name = (obj.get("metadata") or {}).get("name", "")
    if family is None or not topology:
        raise KubeError(
            422,
            "Invalid",
            f'JobSet.jobset.x-k8s.io "{name}" is invalid: the simulated cluster runs JobSets '
            f"whose pods select a TPU slice ({ACCELERATOR_LABEL} and {TOPOLOGY_LABEL} in "
            "the pod template's nodeSelector)",
        )
    try:
        return Slice.of(family, str(topology)), int(job.get("replicas") or 1), spec
    except TpuTrainerError as e:
        raise KubeError(422, "Invalid", f'JobSet.jobset.x-k8s.io "{name}" is invalid: {e}') from e


def _zone(state: State, s: Slice) -> str:
    zones = [
        p["zone"]
        for p in state["node_pools"].values()
        if p["machine_type"] in (s.machine_type, *s.accelerator.other_machine_types)
    ]
    return zones[0] if zones else str(state.get("zone") or "")


def register(state: State, obj: Obj) -> None:
    """Register the workload of JobSet ``obj`` as xpk's ``workload create`` does, and give
    ``obj`` the model's uid."""
    s, num_slices, spec = _slice(obj)
    name = obj["metadata"]["name"]
    containers = spec.get("containers") or [{}]
    command = " ".join(str(c) for c in containers[0].get("command") or [])
    wl = wls.new_workload(
        state,
        name,
        s,
        num_slices=num_slices,
        zone=_zone(state, s),
        image=str(containers[0].get("image") or ""),
        command=command,
        parallel_flag=len(containers) > 1,
    )
    state["workloads"][name] = wl
    obj["metadata"]["uid"] = wls.jobset_uid(name)


def forget(state: State, name: str) -> bool:
    """Delete JobSet ``name``'s workload (its pods and Workload go with it)."""
    return state["workloads"].pop(name, None) is not None
