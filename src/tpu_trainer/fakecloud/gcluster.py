"""The stand-in ``gcluster`` (Cluster Toolkit's CLI, which cannot be installed here).

Every command line is first read with the model of gcluster's flags
(:mod:`tpu_trainer.infra.gcluster_flags`): an unknown flag, a missing required one, a bad value
or a bad ``--name`` ends it as cobra would (``Error: ...`` on stderr, exit 1). Then ``job
submit`` makes the workload through the shared workload model (:func:`workloads.new_workload`,
its JobSet shaped as gcluster's: ``main-job``, ``gcluster.google.com/workload``,
``workload-container``), resolving a TPU v7 slice's workload policy on its own as gcluster
v1.104 does; ``job cancel NAME`` deletes it. Pods, logs and JobSet conditions then come from the
same state as for xpk. Its ``[timestamp]: message`` lines are those of ``pkg/logging``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud import workloads as wls
from tpu_trainer.fakecloud.common import Answer, Handler, ToolExit, run_tool
from tpu_trainer.fakecloud.state import FAKE_NOW, State, new_policy
from tpu_trainer.infra.gcluster_flags import Verdict, check_gcluster_command
from tpu_trainer.plan.slices import Slice
from tpu_trainer.recipes.recipe import gcluster_device_type

GCLUSTER_VERSION = "v1.104.0"


@dataclass
class Gcluster:
    """One gcluster command's output and its parsed command line."""

    answer: Answer
    verdict: Verdict

    def arg(self, name: str) -> str:
        return self.verdict.value(name) or ""

    def info(self, text: str) -> None:
        self.answer.out(f"{FAKE_NOW}: {text}")

    def fail(self, message: str) -> NoReturn:
        raise ToolExit(f"Error: {message}\n", 1)

    def credentials(self, state: State) -> None:
        """configureKubectl: ``gcloud container clusters get-credentials`` for the cluster."""
        cluster, location, project = self.arg("cluster"), self.arg("location"), self.arg("project")
        if not cluster_matches(state, cluster, _region(location), project):
            self.fail(
                f"failed to configure kubectl: cluster '{cluster}' not found in location "
                f"'{location}' of project '{project}'"
            )


def _region(location: str) -> str:
    """``us-central1`` from a zone (``us-central1-ai1a``) or a region."""
    return "-".join(location.split("-")[:2])


def cluster_matches(state: State, cluster: str, region: str, project: str) -> bool:
    """Whether get-credentials finds ``cluster`` in ``region`` of ``project``."""
    c = state["cluster"]
    return bool(
        c["exists"]
        and c["name"] == cluster
        and region == state["region"]
        and project == state["project"]
    )


def new_workload_policy(state: State, s: Slice) -> str | None:
    """The workload policy a TPU v7 multi-host slice needs, made when missing (as gcluster
    makes it on submit): its name when made now, else None."""
    name = s.workload_policy
    if name is None or name in state["resource_policies"]:
        return None
    state["resource_policies"][name] = new_policy(name, s.topology_name)
    return name


def _gcluster_jobs(state: State) -> dict[str, dict[str, Any]]:
    """The workloads gcluster's label selector (``gcluster.google.com/workload``) finds."""
    return {n: wl for n, wl in state["workloads"].items() if wl.get("submitter") == "gcluster"}


def submit(g: Gcluster, state: State) -> None:
    g.info("Starting gcluster job submit workflow...")
    g.credentials(state)
    name = g.arg("name")
    if name in state["workloads"]:
        status = wls.phase(state["workloads"][name])
        g.fail(
            f"job with name '{name}' already exists in state '{status}'. You can cancel the "
            f"existing job using 'gcluster job cancel {name} --cluster {g.arg('cluster')} "
            f"--location {g.arg('location')} --project {g.arg('project')}' or resubmit this "
            "workload with a different name using '--name'"
        )
    device = gcluster_device_type(g.arg("compute-type"), g.arg("topology") or None)
    try:
        s = Slice.parse(device)
    except TpuTrainerError:
        g.fail(f"unsupported compute type {g.arg('compute-type')!r} for topology {device!r}")
    queue = str(g.arg("queue") or k8s.LOCAL_QUEUE)
    _local_queue(g, state, queue)
    made = new_workload_policy(state, s)
    if made is not None:
        g.info(f"Created workload policy '{made}' for topology {s.topology_name}")
    wl = wls.new_workload(
        state,
        name,
        s,
        num_slices=int(g.arg("num-slices") or 1),
        zone=g.arg("location"),
        image=g.arg("image") or g.arg("base-image"),
        command=g.arg("command"),
        parallel_flag=g.arg("gke-disable-parallel-containers") == "true",
        submitter="gcluster",
        queue=queue,
    )
    state["workloads"][name] = wl
    if state["behaviours"].get("workload_create_fails_after_submit"):
        g.fail("failed to apply manifest: Unable to connect to the server: net/http: TLS timeout")
    g.info(
        "Follow your workload details here: https://console.cloud.google.com/kubernetes/job/"
        f"{g.arg('location')}/{g.arg('cluster')}/default/{name}-main-job-0/details"
        f"?project={g.arg('project')}"
    )
    g.info("gcluster job submit workflow completed.")


def _local_queue(g: Gcluster, state: State, queue: str) -> None:
    """configureClusterEnvironment: the ``--queue`` LocalQueue (gcluster's default
    ``multislice-queue`` when none is named and the cluster has none) must exist; when it does
    not, gcluster asks at a yes/no prompt whether to create default queues, and a standard input
    at its end (no terminal) ends it with ``EOF``. The default queues a yes would create are not
    simulated."""
    g.info(f"Using provided Kueue LocalQueue: {queue}")
    if k8s.get(state, k8s.KINDS[2], queue) is not None:
        return
    g.answer.out(
        f"LocalQueue '{queue}' does not exist. Do you want gcluster to create default Kueue "
        "resources (ClusterQueue and LocalQueue) with calculated cluster capacity? [Y/n]: "
    )
    reply = sys.stdin.readline()
    if not reply:
        raise ToolExit(f"{FAKE_NOW}: EOF\n", 1)
    if reply.strip().lower() in ("n", "no"):
        g.fail(
            f"LocalQueue '{queue}' does not exist and user declined to create default queues. "
            "Please create one manually or specify an existing queue using --queue flag"
        )
    g.fail("fake gcluster: creating gcluster's default Kueue queues is not simulated")


def cancel(g: Gcluster, state: State) -> None:
    g.credentials(state)
    name = g.verdict.positional[0]
    wl = _gcluster_jobs(state).get(name)
    if wl is None:
        g.fail(f"jobset {name} not found in any namespace")
    status = {"Succeeded": "Completed", "Failed": "Failed"}.get(wls.phase(wl))
    if status is None:
        g.info(f"Canceling job '{name}' in cluster '{g.arg('cluster')}'...")
        verb = "Cancel"
    else:
        g.info(f"Cleaning up resources for the '{status}' job '{name}' in cluster ...")
        verb = "Cleanup"
    del state["workloads"][name]
    g.info(f"{verb} operation on Job '{name}' completed successfully.")


_COMMANDS: dict[str, Callable[[Gcluster, State], None]] = {"submit": submit, "cancel": cancel}


def _handler(verdict: Verdict) -> Handler:
    if not verdict.ok:
        raise ToolExit(f"Error: {verdict.problems[0]}\n", 1)
    command = _COMMANDS.get(verdict.command)
    if command is None:
        raise ToolExit(f"fake gcluster: `gcluster job {verdict.command}` is not answered\n", 1)

    def run(state: State, answer: Answer) -> None:
        g = Gcluster(answer, verdict)
        if verdict.command == "submit" and (g.arg("dry-run") or g.arg("dry-run-out")):
            g.info("Dry run: the manifest is written, nothing is applied.")
            return
        command(g, state)

    return run


def main(argv: list[str]) -> int:
    """Answer one gcluster command line (without the leading ``gcluster``)."""
    argv = list(argv[1:] if argv and argv[0] == "gcluster" else argv)
    if argv in (["--version"], ["version"]):
        sys.stdout.write(f"gcluster version {GCLUSTER_VERSION}\n")
        return 0
    verdict = check_gcluster_command(["gcluster", *argv])
    return run_tool("gcluster", argv, lambda _a: _handler(verdict))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
