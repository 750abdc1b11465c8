"""Workloads xpk submitted: whether Kueue admits them, their pods, and how they progress.

A workload is held back (no pods) while Kueue cannot admit it: its ResourceFlavor, the
ClusterQueue quota or the LocalQueue is missing. Admitted, its pods stay Pending while no
RUNNING node pool in its zone matches the slice; otherwise every read (``kubectl get pods``,
``xpk workload list``) moves it along: Pending for ``pending_polls`` reads, Running for
``running_polls``, then Succeeded or Failed by the scenario's exit code.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud import maxtext_log as mlog
from tpu_trainer.fakecloud.jobset_shape import SHAPES, JobSetShape, containers
from tpu_trainer.fakecloud.kueue_admission import blocker
from tpu_trainer.fakecloud.pools import tpu_accelerator
from tpu_trainer.fakecloud.state import FAKE_NOW, State
from tpu_trainer.plan.slices import Slice

_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"
FINISHED_READS = 1_000_000
RESTARTED_EXIT_CODES = frozenset({42, *range(127, 256)})
"""Exit codes xpk's pod failure policy leaves to the JobSet's restarts (xpk 1.16.0's default
``--restart-on-exit-codes``); any other fails the JobSet at once."""


def queue_of(wl: dict[str, Any]) -> str:
    """The LocalQueue a workload was submitted to."""
    return str(wl.get("queue") or k8s.LOCAL_QUEUE)


def new_workload(
    state: State,
    name: str,
    s: Slice,
    *,
    num_slices: int,
    zone: str,
    image: str,
    command: str,
    parallel_flag: bool,
    submitter: str = "xpk",
    queue: str = k8s.LOCAL_QUEUE,
) -> dict[str, Any]:
    """A workload record for ``num_slices`` slices of ``s`` (pod name suffixes drawn now), its
    JobSet shaped as ``submitter`` (xpk or gcluster, see :mod:`jobset_shape`) makes it, sent to
    the LocalQueue ``queue``."""
    spec = state["workload_defaults"]
    log, reclaim = _log(state, name, spec, command)
    suffixes = [
        [name_suffix(f"{name}/{state['seq']}/{j}/{i}") for i in range(s.hosts)]
        for j in range(num_slices)
    ]
    return {
        "name": name,
        "device": s.device_type_number,
        "device_type": s.device_type,
        "topology": s.topology_name,
        "accelerator": s.accelerator.gke_accelerator,
        "machine_types": [s.machine_type, *s.accelerator.other_machine_types],
        "hosts": s.hosts,
        "chips": s.chips,
        "chips_per_host": s.chips_per_host,
        "workload_policy": s.workload_policy,
        "num_slices": num_slices,
        "zone": zone,
        "image": image,
        "command": command,
        "suffixes": suffixes,
        "submitter": submitter,
        "queue": queue,
        "containers": containers(s, submitter, spec.get("parallel_containers"), parallel_flag),
        "reads": 0,
        "exit_code": int(spec["exit_code"]),
        "pending_polls": int(spec["pending_polls"]),
        "running_polls": int(spec["running_polls"]),
        "hang": bool(spec["hang"]),
        "hang_after_step": spec.get("hang_after_step"),
        "hang_worker": int(spec.get("hang_worker") or 0),
        "tpus_taken": bool(spec.get("tpus_taken")),
        "log": log,
        "reclaim": reclaim,
        "other_hosts_log": spec.get("other_hosts_log"),
    }


def _log(state: State, name: str, spec: dict[str, Any], command: str) -> tuple[str, bool]:
    """Worker 0's log (see :mod:`maxtext_log`), and whether the slice is reclaimed under it."""
    base = str(spec["log"])
    after = spec.get("reclaim_after_step")
    if after is None:  # the default log's steps are made when it is read (see log_of)
        return base, False
    reclaimed = state.setdefault("reclaimed", {})
    if name not in reclaimed:
        reclaimed[name] = mlog.durable_before(int(after), command)
        return mlog.reclaimed_log(base, command, int(after)), True
    return mlog.resumed_log(base, command, reclaimed[name]), False


def name_suffix(seed: str) -> str:
    """Five characters of Kubernetes' random-name alphabet (stable for a seed)."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_SUFFIX_CHARS[b % len(_SUFFIX_CHARS)] for b in digest[:5])


def kueue_blocker(state: State, wl: dict[str, Any]) -> str | None:
    """Why Kueue keeps the workload suspended (no pods), or None when it admits it."""
    found = blocker(state, wl)
    return None if found is None else found[1]


def matching_pools(
    state: State, wl: dict[str, Any], *, running: bool = True
) -> list[dict[str, Any]]:
    """Node pools whose nodes the workload's pods can land on (in its zone)."""
    out = []
    for pool in state["node_pools"].values():
        acc = tpu_accelerator(pool["machine_type"])
        if (
            acc is None
            or acc.gke_accelerator != wl["accelerator"]
            or pool["machine_type"] not in wl["machine_types"]
            or pool["node_count"] != wl["hosts"]
        ):
            continue
        if wl["workload_policy"] and pool["placement_policy"] != wl["workload_policy"]:
            continue
        if not wl["workload_policy"] and wl["hosts"] > 1 and pool["tpu_topology"] != wl["topology"]:
            continue
        if running and (pool["status"] != "RUNNING" or pool["zone"] != wl["zone"]):
            continue
        out.append(pool)
    return out


def schedulable(state: State, wl: dict[str, Any]) -> bool:
    if wl.get("reclaimed"):
        return True  # it ran: its pods were placed before their slice went
    if wl.get("tpus_taken"):
        return False
    return len(matching_pools(state, wl)) >= int(wl["num_slices"])


def observe(state: State, wl: dict[str, Any]) -> str:
    """One read of the workload; returns its phase: Suspended, Pending, Running, Succeeded,
    Failed."""
    if wl.get("reclaimed"):
        return phase(wl)  # its slice is gone: it stays as it ended
    if kueue_blocker(state, wl) is not None:
        return "Suspended"
    if not schedulable(state, wl):
        return "Unschedulable"
    wl["reads"] += 1
    ph = phase(wl)
    if wl.get("reclaim") and ph in ("Succeeded", "Failed"):
        _reclaim(state, wl)
    return ph


def _reclaim(state: State, wl: dict[str, Any]) -> None:
    """The slice under the workload is taken back: its pools go, their reservations are full."""
    for pool in matching_pools(state, wl):
        res = state["reservations"].get(pool.get("reservation") or "")
        if res is not None:
            res["capacity"] = "exhausted"
            res["in_use_hosts"] = max(0, res["in_use_hosts"] - pool["hosts_held"])
        del state["node_pools"][pool["name"]]
    wl["reclaim"], wl["reclaimed"] = False, True


def phase(wl: dict[str, Any]) -> str:
    reads = wl["reads"]
    if reads <= wl["pending_polls"]:
        return "Pending"
    if hangs(wl) or reads <= wl["pending_polls"] + wl["running_polls"]:
        return "Running"
    return "Succeeded" if wl["exit_code"] == 0 else "Failed"


# ---- pods --------------------------------------------------------------------------------------
def pod_names(wl: dict[str, Any]) -> list[tuple[int, int, str]]:
    """(slice, worker, pod name) for every pod of the workload."""
    return [
        (j, i, f"{wl['name']}-{_shape(wl).replicated_job}-{j}-{i}-{suffix}")
        for j, row in enumerate(wl["suffixes"])
        for i, suffix in enumerate(row)
    ]


def _container_status(name: str, state_name: str, exit_code: int) -> dict[str, Any]:
    status: dict[str, Any] = {
        "name": name,
        "ready": state_name == "Running",
        "restartCount": 0,
        "image": "",
        "started": state_name == "Running",
    }
    if state_name == "Pending":
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
    elif state_name == "Running":
        status["state"] = {"running": {"startedAt": FAKE_NOW}}
    else:
        reason = "Completed" if exit_code == 0 else "Error"
        status["state"] = {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": FAKE_NOW,
                "finishedAt": FAKE_NOW,
            }
        }
    return status


def pod_spec(wl: dict[str, Any]) -> dict[str, Any]:
    per_container = max(1, wl["chips_per_host"] // len(wl["containers"]))
    selector = {
        "cloud.google.com/gke-tpu-accelerator": wl["accelerator"],
        "cloud.google.com/gke-tpu-topology": wl["topology"],
    }
    if wl["workload_policy"]:
        selector["cloud.google.com/placement-policy-name"] = wl["workload_policy"]
    return {
        "containers": [
            {
                "name": c,
                "image": wl["image"],
                "resources": {"limits": {k8s.TPU_RESOURCE: str(per_container)}},
            }
            for c in wl["containers"]
        ],
        "nodeSelector": selector,
        "restartPolicy": "Never",
        "subdomain": wl["name"],
    }


def _unschedulable(state: State, wl: dict[str, Any]) -> dict[str, Any]:
    """The scheduler's PodScheduled condition: no matching node, or their TPUs all taken."""
    nodes = sum(int(p["node_count"]) for p in state["node_pools"].values())
    matching = sum(int(p["node_count"]) for p in matching_pools(state, wl))
    if wl.get("tpus_taken") and matching:
        message = (
            f"0/{nodes} nodes are available: {matching} Insufficient {k8s.TPU_RESOURCE}, "
            f"{nodes - matching} node(s) didn't match Pod's node affinity/selector. preemption: "
            f"0/{nodes} nodes are available: {matching} No preemption victims found for "
            f"incoming pod, {nodes - matching} Preemption is not helpful for scheduling."
        )
    else:
        message = (
            f"0/{nodes} nodes are available: {nodes} node(s) didn't match Pod's node "
            f"affinity/selector. preemption: 0/{nodes} nodes are available: {nodes} "
            "Preemption is not helpful for scheduling."
        )
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": FAKE_NOW,
    }


_DISRUPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "TerminationByKubelet",
    "message": "Pod was terminated in response to imminent node shutdown.",
    "lastTransitionTime": FAKE_NOW,
}


def pod_json(
    state: State, wl: dict[str, Any], j: int, i: int, name: str, ph: str
) -> dict[str, Any]:
    """One pod of the workload in phase ``ph`` (Pending, Unschedulable, Running, ...)."""
    spec = pod_spec(wl)
    status: dict[str, Any] = {"phase": "Pending" if ph == "Unschedulable" else ph}
    if ph == "Unschedulable":
        status["conditions"] = [_unschedulable(state, wl)]
    elif wl.get("reclaimed"):
        status["conditions"] = [_DISRUPTED]
    else:
        pools = matching_pools(state, wl)
        pool = pools[j % len(pools)]["name"] if pools else "np"
        spec["nodeName"] = f"gke-{state['cluster']['name']}-{pool}-{i:04d}"
        code = wl["exit_code"]
        status["containerStatuses"] = [_container_status(c, ph, code) for c in wl["containers"]]
        status["podIP"] = f"10.{j + 8}.{i // 250}.{i % 250 + 2}"
    shape = _shape(wl)
    labels = {
        "jobset.sigs.k8s.io/jobset-name": wl["name"],
        "jobset.sigs.k8s.io/replicatedjob-name": shape.replicated_job,
        "jobset.sigs.k8s.io/job-index": str(j),
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "batch.kubernetes.io/job-completion-index": str(i),
        "job-name": f"{wl['name']}-{shape.replicated_job}-{j}",
    }
    if shape.labels_pods:
        labels[shape.workload_label] = wl["name"]
    meta = {"name": name, "namespace": "default", "creationTimestamp": FAKE_NOW, "labels": labels}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pods(state: State, jobset: str | None = None) -> list[dict[str, Any]]:
    """The pods of every workload (or of the JobSet ``jobset``), each workload read once."""
    out = []
    for wl in state["workloads"].values():
        if jobset is not None and wl["name"] != jobset:
            continue
        ph = observe(state, wl)
        if ph == "Suspended":
            continue
        out += [pod_json(state, wl, j, i, name, ph) for j, i, name in pod_names(wl)]
    return out


def _shape(wl: dict[str, Any]) -> JobSetShape:
    return SHAPES[str(wl.get("submitter") or "xpk")]


def jobset_uid(name: str) -> str:
    """The JobSet's uid (stable for its name); Kueue labels its Workload with it."""
    h = hashlib.sha256(f"jobset/{name}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": FAKE_NOW,
    }


def jobset_conditions(wl: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    """The conditions JobSet v0.12's controller writes (pkg/constants): Kueue creates the JobSet
    suspended and resumes it on admission; it ends Completed, or Failed by the failure policy
    xpk gives every JobSet (``FailJobSet`` for a job failed by its pod failure policy, i.e. an
    exit code xpk does not restart on; otherwise a restart, which ``maxRestarts: 0`` turns
    into ``ReachedMaxRestarts``)."""
    if ph == "Suspended":
        return [_condition("Suspended", "True", "SuspendedJobs", "jobset is suspended")]
    out = [_condition("Suspended", "False", "ResumeJobs", "jobset is resumed")]
    if ph == "Succeeded":
        out.append(
            _condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully")
        )
    elif ph == "Failed":
        first = f"(first failed job: {wl['name']}-{_shape(wl).replicated_job}-0)"
        if int(wl["exit_code"]) in RESTARTED_EXIT_CODES:
            reason, text = (
                "ReachedMaxRestarts",
                "jobset failed due to reaching max number of restarts",
            )
        else:
            reason, text = (
                "FailJobSetFailurePolicyAction",
                "applying FailJobSet failure policy action",
            )
        out.append(_condition("Failed", "True", reason, f"{text} {first}"))
    return out


def jobset_json(state: State, wl: dict[str, Any]) -> dict[str, Any]:
    ph = observe(state, wl)
    conditions = jobset_conditions(wl, ph)
    status: dict[str, Any] = {"conditions": conditions, "restarts": 0}
    ended = [c["type"] for c in conditions if c["type"] in ("Completed", "Failed")]
    if ended:
        status["terminalState"] = ended[0]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": wl["name"],
            "namespace": "default",
            "uid": jobset_uid(wl["name"]),
            "creationTimestamp": FAKE_NOW,
            "labels": {
                "kueue.x-k8s.io/queue-name": queue_of(wl),
                _shape(wl).workload_label: wl["name"],
            },
        },
        "spec": {
            "failurePolicy": {
                "maxRestarts": 0,
                "rules": [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
            },
            "replicatedJobs": [
                {
                    "name": _shape(wl).replicated_job,
                    "replicas": wl["num_slices"],
                    "template": {"spec": {"parallelism": wl["hosts"], "completions": wl["hosts"]}},
                }
            ],
            "suspend": ph == "Suspended",
        },
        "status": status,
    }


def hangs(wl: dict[str, Any]) -> bool:
    """The workload never finishes (``hang``, or worker 0 stops logging at a step)."""
    return bool(wl["hang"]) or wl.get("hang_after_step") is not None


def log_of(wl: dict[str, Any], j: int, i: int, container: str) -> str:
    """Worker 0 of slice 0 prints the scenario's log (its first container), up to the
    ``hang_after_step`` step's line when set; others one line. With a ``hang_worker`` other
    than 0, every host of slice 0 prints the log: that one up to the step before."""
    after, quiet = wl.get("hang_after_step"), int(wl.get("hang_worker") or 0)
    every_host = quiet > 0 and after is not None
    if j == 0 and (i == 0 or every_host) and container == wl["containers"][0]:
        stop = int(str(after)) - 1 if every_host and i == quiet else after
        text = str(wl["log"])
        if text == mlog.DEFAULT_LOG:  # carried on to the command's last step: not kept in the
            text = mlog.default_log(text, str(wl["command"]))  # state, read at every call
        text = _until_step(text, stop)
        return text if text.endswith("\n") or not text else text + "\n"
    if wl.get("other_hosts_log"):
        text = str(wl["other_hosts_log"])
        return text if text.endswith("\n") else text + "\n"
    return (
        f"I1122 04:27:31.120000 139872 train.py:98] worker {i} of slice {j} "
        f"({container}) started; metrics are logged by worker 0\n"
    )


def _until_step(text: str, step: int | None) -> str:
    """``text`` up to and including the ``completed step: <step>,`` line."""
    if step is None:
        return text
    lines = text.splitlines(keepends=True)
    for n, line in enumerate(lines):
        if f"completed step: {step}," in line:
            return "".join(lines[: n + 1])
    return text
