"""The fake ``xpk cluster adapt``.

Order of work: get credentials; write ``<cluster>-resources-configmap`` (xpk replaces its data
with the one device) and ``<cluster>-metadata-configmap``; enable JobSet; here the scenario's
``xpk_memory_limit_bug`` kills it with xpk's AttributeError; then, when
``xpk_adapt_creates_node_pools`` (the seed's older xpk; xpk 1.16.0 creates none), node pools
``<cluster>-np-<i>`` the way ``xpk cluster create`` makes them; then Kueue: the ResourceFlavor,
the ClusterQueue (xpk replaces it: other flavors are dropped) and the LocalQueue.
"""

from __future__ import annotations

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.common import ToolExit
from tpu_trainer.fakecloud.pools import CreateRequest, GkeError, create_pool, refusal_text
from tpu_trainer.fakecloud.state import State, next_id, state_path
from tpu_trainer.fakecloud.xpk_steps import credentials, ensure_policy, system
from tpu_trainer.fakecloud.xpk_text import MEMORY_LIMIT_TRACEBACK, XPK_VERSION, Xpk
from tpu_trainer.plan.slices import Slice

_CREATE = "gcloud.beta.container.node-pools.create"


def desired_pool_names(existing: list[str], cluster: str, count: int) -> list[str]:
    """xpk's get_desired_node_pool_names: existing ``<cluster>-np-*`` first, then free indexes."""
    result = set([n for n in existing if n.startswith(f"{cluster}-np-")][:count])
    i = 0
    while len(result) < count:
        result.add(f"{cluster}-np-{i}")
        i += 1
    return sorted(result)


def _configmaps(x: Xpk, state: State, s: Slice) -> dict[str, str] | None:
    """Write both configmaps; returns the resources data as it was before."""
    cluster, slices = x.arg("cluster"), int(x.arg("num_slices") or 1)
    x.say("Creating ConfigMap for cluster")
    name = f"{cluster}-resources-configmap"
    before = k8s.get(state, k8s.KINDS[4], name)
    k8s.put(state, k8s.configmap(name, {s.device_type_number: str(slices * s.hosts)}), applied=True)
    meta = {
        "xpk_version": XPK_VERSION,
        "capacity_type": "RESERVATION",
        "reservation_id": str(x.arg("reservation") or ""),
    }
    k8s.put(state, k8s.configmap(f"{cluster}-metadata-configmap", meta), applied=True)
    x.say(
        "Enabling the jobset API on our cluster, to be deprecated when Jobset is globally available"
    )
    return None if before is None else dict(before.get("data") or {})


def _relay_failure(
    x: Xpk, state: State, name: str, gcloud_text: str, made: int, wanted: int
) -> None:
    """What xpk prints when one of its ``gcloud ... node-pools create`` fails."""
    folder = state_path().parent / "xpk-logs"
    folder.mkdir(exist_ok=True)
    log = folder / f"NodepoolCreate-{name}-{next_id(state)}.log"
    log.write_text(gcloud_text, encoding="utf-8")
    x.say("Terminating all Create Nodepools processes since at least one failed.")
    x.say(f"Failure is NodepoolCreate-{name} and logfile {log}")
    x.say("Create Nodepools returned ERROR 1")
    marker = "finished with error:"
    if marker in gcloud_text:
        error = gcloud_text[gcloud_text.index(marker) + len(marker) :].strip()
        x.say(f"Nodepool creation error: {error[:400]}")
        if "lack of capacity" in error or "Requested resource is exhausted" in error:
            x.say("NOTE: this error might be caused by a stockout")
        if "is incorrect for the requested resources" in error:
            x.say(
                "NOTE: this error might be caused by setting --host-maintenance-interval="
                "PERIODIC on a reservation that does not have PERIODIC set. Check your "
                "reservation configuration."
            )
    x.say(f"Successfully created {made}/{wanted} of requested nodepools.")
    x.fail(1)


def _zone_guard(x: Xpk, state: State, existing: list[str]) -> None:
    """xpk compares an existing pool's locations with --zone (real xpk takes the first pool of
    the list, even default-pool; the fake only looks at its own ``<cluster>-np-*`` pools)."""
    ours = [n for n in existing if n.startswith(f"{x.arg('cluster')}-np-")]
    if not ours:
        return
    zone = state["node_pools"][ours[0]]["zone"]
    if zone != x.arg("zone"):
        x.say(
            f"Cluster {x.arg('cluster')} already has nodepools in zone: {zone}. Use the same "
            "zone to update nodepools in the cluster."
        )
        x.fail(1)


def _to_delete(
    x: Xpk, state: State, s: Slice, desired: list[str], old_data: dict[str, str] | None
) -> list[str]:
    cluster = x.arg("cluster")
    ours = [n for n in state["node_pools"] if n.startswith(f"{cluster}-np-")]
    device_known = (
        old_data is None
        or s.device_type_number in old_data
        or s.accelerator.gke_accelerator in old_data
    )
    return [n for n in ours if n not in desired or not device_known]


def _node_pools(
    x: Xpk, state: State, s: Slice, region: str, old_data: dict[str, str] | None
) -> None:
    cluster, slices = x.arg("cluster"), int(x.arg("num_slices") or 1)
    x.say(f"Creating {slices} node pool or pools of {s.device_type_number}")
    existing = list(state["node_pools"])
    _zone_guard(x, state, existing)
    desired = desired_pool_names(existing, cluster, slices)
    doomed = _to_delete(x, state, s, desired, old_data)
    if doomed:
        caller = (
            'core/nodepool.py", line 192, in run_gke_node_pool_create_command\n'
            "    if node_pools_to_delete and not ask_for_user_consent("
        )
        question = f"Planning to delete {len(doomed)} node pools including {doomed}. \nDo you wish to delete?"
        if not x.consent(question, caller):
            x.say(
                "You have requested to not delete the existing nodepools in the cluster. There "
                "will be no change to the cluster."
            )
            x.fail(1)
        for name in doomed:
            del state["node_pools"][name]
    ensure_policy(x, state, s, region)
    todo = [n for n in desired if n not in state["node_pools"]]
    for made, name in enumerate(todo):
        req = _request(x, state, s, region, name)
        x.say(
            f"To complete NodepoolCreate-{name} we are executing gcloud beta container node-pools "
            f"create {name} --location={region} --cluster={cluster} --project={req.project} "
            f"--node-locations={req.zone} --machine-type={req.machine_type} ..."
        )
        try:
            create_pool(state, req)
        except GkeError as e:
            text = refusal_text(state, req, e).stderr
            _relay_failure(x, state, name, text, made, len(todo))
    x.say("Create or delete node pool request complete.")


def _request(x: Xpk, state: State, s: Slice, region: str, name: str) -> CreateRequest:
    return CreateRequest(
        command=_CREATE,
        project=x.arg("project") or state["project"],
        location=region,
        cluster=x.arg("cluster"),
        name=name,
        zone=x.arg("zone"),
        machine_type=s.machine_type,
        num_nodes=s.hosts,
        node_version=state["cluster"]["node_version"],
        placement_policy=s.workload_policy,
        tpu_topology=None if s.workload_policy or not s.multi_host else s.topology_name,
        placement_type=None if s.workload_policy or not s.multi_host else "COMPACT",
        reservation_affinity="specific" if x.arg("reservation") else None,
        reservation=f"projects/{x.arg('project')}/reservations/{x.arg('reservation')}"
        if x.arg("reservation")
        else None,
    )


def _kueue(x: Xpk, state: State, s: Slice) -> None:
    slices = int(x.arg("num_slices") or 1)
    flavor = f"{slices}x{s.device_type_number}"
    x.say("Enabling Kueue on the cluster")
    k8s.put(
        state,
        k8s.resource_flavor(flavor, s.accelerator.gke_accelerator, s.topology_name),
        applied=True,
    )
    k8s.put(state, k8s.cluster_queue({flavor: s.chips * slices}), applied=True)
    k8s.put(state, k8s.local_queue(), applied=True)
    x.say(
        f"Kueue configured: ResourceFlavor {flavor}, ClusterQueue {k8s.CLUSTER_QUEUE}, "
        f"LocalQueue {k8s.LOCAL_QUEUE}"
    )


def cluster_adapt(x: Xpk, state: State) -> None:
    x.say(f"Starting xpk v{XPK_VERSION}")
    s = system(x)
    cluster, project = x.arg("cluster"), x.arg("project") or state["project"]
    x.say(f"Starting cluster adaptation for cluster {cluster}:")
    region = credentials(x, state)
    old_data = _configmaps(x, state, s)
    if state["behaviours"]["xpk_memory_limit_bug"]:
        raise ToolExit(MEMORY_LIMIT_TRACEBACK, 1)
    if state["behaviours"]["xpk_adapt_creates_node_pools"]:
        _node_pools(x, state, s, region, old_data)
    _kueue(x, state, s)
    x.say("GKE commands done! Resources are created.")
    x.say(
        f"See your GKE Cluster here: https://console.cloud.google.com/kubernetes/clusters/"
        f"details/{region}/{cluster}/details?project={project}"
    )
    x.done()
