"""What each submitter's JobSet looks like inside: its replicated job (and so its pods' names),
the workload label it carries, and its containers' names.

xpk 1.16.0 names the replicated job ``slice-job``, labels the JobSet
``xpk.google.com/workload`` and runs ``jax-tpu`` (``jax-tpu-1``/``-2`` with parallel
containers). Cluster Toolkit's ``gcluster job submit`` (``pkg/orchestrator/gke/templates/
jobset.tmpl`` and ``gke_job_orchestrator.go``) names it ``main-job``, labels the JobSet and
its pod template ``gcluster.google.com/workload`` and runs ``workload-container``
(``workload-container-1``/``-2`` on tpu7x, where parallel containers are the default unless
``--gke-disable-parallel-containers``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_trainer.plan.slices import Slice


@dataclass(frozen=True, slots=True)
class JobSetShape:
    replicated_job: str
    workload_label: str
    container: str
    labels_pods: bool
    """Whether the pod template carries the workload label too."""


SHAPES = {
    "xpk": JobSetShape("slice-job", "xpk.google.com/workload", "jax-tpu", labels_pods=False),
    "gcluster": JobSetShape(
        "main-job", "gcluster.google.com/workload", "workload-container", labels_pods=True
    ),
}


def containers(s: Slice, submitter: str, scenario: bool | None, flag: bool) -> list[str]:
    """One container per host, or two where TPU v7 hosts run parallel containers: for xpk when
    asked (``flag``) or, by default, on a multi-host slice (``scenario`` overrides); for gcluster
    unless ``flag`` (``--gke-disable-parallel-containers``) turns them off."""
    base = SHAPES[submitter].container
    two_per_host = s.accelerator.tensorcores_per_chip == 2 and s.chips_per_host == 4
    if submitter == "gcluster":
        parallel = two_per_host and not flag
    else:
        wanted = flag or (s.multi_host if scenario is None else scenario)
        parallel = two_per_host and s.accelerator.multi_host_needs_workload_policy and wanted
    return [f"{base}-1", f"{base}-2"] if parallel else [base]
