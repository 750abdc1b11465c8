"""Steps several fake ``xpk`` (and ``gcluster``) commands share: get-credentials, the slice a
command names, and the workload resource policy TPU v7 multi-host slices need."""

from __future__ import annotations

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud.gke_text import response_error
from tpu_trainer.fakecloud.state import State, new_policy
from tpu_trainer.fakecloud.xpk_text import Xpk, zone_to_region
from tpu_trainer.plan.slices import Slice


def credentials(x: Xpk, state: State) -> str:
    """xpk's get-credentials step; returns the cluster's region (fails as gcloud would)."""
    cluster, project = x.arg("cluster"), x.arg("project") or state["project"]
    region = zone_to_region(x.arg("zone") or state["region"])
    command = (
        f"gcloud container clusters get-credentials {cluster} --location={region} "
        f"--dns-endpoint --project={project}"
    )
    x.task(f"get-credentials-dns-endpoint to cluster {cluster}", command)
    if not cluster_matches(state, cluster, region, project):
        path = f"projects/{project}/locations/{region}/clusters/{cluster}"
        x.say(f"Task: `get-credentials-dns-endpoint to cluster {cluster}` terminated with code `1`")
        x.say(
            response_error(
                "gcloud.container.clusters.get-credentials", 404, f"Not found: {path}."
            ).rstrip()
        )
        x.fail(1)
    x.say("Finished get-credentials and kubectl setup.")
    return region


def cluster_matches(state: State, cluster: str, region: str, project: str) -> bool:
    """Whether get-credentials finds ``cluster`` in ``region`` of ``project``."""
    c = state["cluster"]
    return bool(
        c["exists"]
        and c["name"] == cluster
        and region == state["region"]
        and project == state["project"]
    )


def system(x: Xpk) -> Slice:
    """The slice ``--tpu-type``/``--device-type`` names, or xpk's failure."""
    device = x.arg("tpu_type") or x.arg("device_type") or ""
    try:
        return Slice.parse(device)
    except TpuTrainerError:
        x.say(f"Unable to find system characteristics for {device}")
        x.say("Fetching system characteristics failed!")
        x.fail(1)


def ensure_policy(x: Xpk, state: State, s: Slice, region: str) -> None:
    """xpk's ensure_resource_policy_exists for TPU v7 multi-host slices."""
    name = new_workload_policy(state, s)
    if name is None:
        return
    x.task(
        "Create resource policy",
        f"gcloud beta compute resource-policies create workload-policy "
        f"{name} --project={state['project']} --region={region} --type=HIGH_THROUGHPUT "
        f"--accelerator-topology={s.topology_name}",
    )


def new_workload_policy(state: State, s: Slice) -> str | None:
    """The workload policy a TPU v7 multi-host slice needs, made when missing (as xpk and
    gcluster make it on submit): its name when made now, else None."""
    name = s.workload_policy
    if name is None or name in state["resource_policies"]:
        return None
    state["resource_policies"][name] = new_policy(name, s.topology_name)
    return name
