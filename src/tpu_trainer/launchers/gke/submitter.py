"""The tool a GKE run submits its workload with: xpk (``xpk workload create``) or Cluster
Toolkit's gcluster (``gcluster job submit``).

Both submit through the generated ``submit_<model>.sh`` and make one JobSet named after the
workload, whose pods, logs and conditions the follow loop reads through kubectl whichever tool
made it. Both wait for its end on the JobSet's own terminal condition (what xpk's
``--wait-for-job-completion`` waits for too, through Kueue's Workload, at the price of an xpk
start-up and its own credentials calls). What differs is behind :class:`Submitter`: how the
workload is cancelled in teardown (``kubectl delete jobset NAME``, which is what ``xpk workload
delete`` runs for a JobSet; ``gcluster job cancel NAME``), and what the tool may make for
itself (gcluster resolves a TPU v7 slice's workload policy on its own). The run store records
which tool submitted each workload (``detail.submitter``), so teardown, ``cleanup`` and ``gc``
cancel it the way that tool's workloads are cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Expired, Pending, Tick, wait_until
from tpu_trainer.infra.runner import CommandResult, CommandRunner
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launchers.gke.jobset import JobSetEnding
from tpu_trainer.store.db import LIVE_STATES, ResourceState, RunStore

SUBMITTER_KEY = "submitter"
"""The key of a workload resource's ``detail`` naming the tool that submitted it."""
XPK, GCLUSTER = "xpk", "gcluster"


class WaitOutcome(StrEnum):
    """How waiting for a workload's end ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where a workload runs: what every submitter's commands name."""

    workload: str
    cluster: str
    project: str
    zone: str


@dataclass(frozen=True, slots=True)
class KueueNeeds:
    """How the cluster's Kueue is made ready for a submitter's workload.

    xpk's users have xpk: ``xpk cluster adapt`` may configure Kueue (where that loses nothing),
    and ``xpk workload create`` reads the ``<cluster>-resources-configmap``. A Cluster Toolkit
    user has no xpk, and gcluster reads no such configmap; ``gcluster job submit`` installs
    Kueue and JobSet when missing and applies ResourceFlavors of its own, but a LocalQueue it
    does not find (``--queue``) it offers to create only at a yes/no prompt, which without a
    terminal ends the submit (``pkg/orchestrator/gke``). So for gcluster the tool applies the
    flavor, ClusterQueue and LocalQueue itself, without xpk."""

    adapt_with_xpk: bool
    xpk_configmap: bool


Ending = Callable[[], JobSetEnding | None]
"""Reads the JobSet's terminal condition through kubectl (None while it has none)."""


class Submitter(Protocol):
    name: str
    """``xpk`` or ``gcluster``: recorded with the workload, shown in errors."""
    kueue: KueueNeeds

    def wait(self, target: Target, ending: Ending, timeout_s: int) -> WaitOutcome:
        """Wait for the workload to finish, after its worker 0's log ended."""
        ...

    def cancel(self, target: Target) -> CommandResult:
        """Delete the workload (its JobSet and pods)."""
        ...

    def makes_for_itself(self, workload_policy: str | None) -> str | None:
        """The workload policy the submit may create on its own (recorded and torn down)."""
        ...

    def script_env(self, project_number: str | None) -> dict[str, str]:
        """What the submit script needs in its environment to run this submitter."""
        ...

    def says_submitted(self, line: str, workload: str) -> bool:
        """Whether a line of the submit script's output says the workload now exists, so the
        run may follow it while the script's last steps finish (False for every line: the
        script's end says it)."""
        ...


@dataclass
class JobSetSubmitter:
    """What both submitters share: they run their commands through ``runner`` and wait on the
    JobSet's own ``Completed``/``Failed`` condition, read every ``poll_seconds`` until it has
    one."""

    runner: CommandRunner
    poll_seconds: float = 10.0
    clock: Clock = SYSTEM_CLOCK

    def wait(self, target: Target, ending: Ending, timeout_s: int) -> WaitOutcome:
        def check(_tick: Tick) -> WaitOutcome | Pending:
            end = ending()
            if end is None:
                return Pending(f"waiting for JobSet {target.workload} to finish")
            return WaitOutcome.SUCCEEDED if end.succeeded else WaitOutcome.FAILED

        found = wait_until(check, interval=self.poll_seconds, timeout=timeout_s, clock=self.clock)
        return WaitOutcome.TIMEOUT if isinstance(found, Expired) else found


APPLIED_JOBSET = "jobset.jobset.x-k8s.io"
"""How ``kubectl apply`` names a JobSet it applied (``<resource>.<group>/<name> <verb>``)."""
APPLY_VERBS = ("created", "configured", "unchanged")

XPK_NAMESPACE = "default"
"""The namespace xpk submits to: the one it makes current (``kubectl config set-context
--current --namespace=default``)."""


@dataclass
class XpkSubmitter(JobSetSubmitter):
    xpk: Xpk | None = None
    """The tool's xpk, which the submit script runs (None: the one on PATH)."""
    kubectl: Kubectl | None = None
    """What deletes the workload (None: kubectl through ``runner``)."""
    name: str = XPK
    kueue: KueueNeeds = KueueNeeds(adapt_with_xpk=True, xpk_configmap=True)

    def cancel(self, target: Target) -> CommandResult:
        """What ``xpk workload delete`` runs for a JobSet workload, once it has the cluster's
        credentials: ``kubectl delete jobset NAME`` in the namespace xpk submits to; the
        JobSet's pods and Kueue's Workload go with it."""
        kubectl = self.kubectl or Kubectl(self.runner)
        return kubectl.delete("jobset", target.workload, XPK_NAMESPACE)

    def makes_for_itself(self, workload_policy: str | None) -> str | None:  # noqa: ARG002
        return None  # the run creates the policy before its node pool; xpk finds it there

    def script_env(self, project_number: str | None) -> dict[str, str]:
        """The tool's xpk first on PATH, and ``PROJECT_NUMBER`` (the script passes it to xpk,
        which then does not ask Cloud Resource Manager for it)."""
        found = self.xpk.script_env() if self.xpk is not None else {}
        return {**found, "PROJECT_NUMBER": project_number or ""}

    def says_submitted(self, line: str, workload: str) -> bool:
        """The line of the ``kubectl apply`` xpk streams (``jobset.jobset.x-k8s.io/NAME
        created``). After it xpk still sleeps out the 10 s poll of that command and looks for
        a monitoring dashboard before it exits."""
        return line.strip() in {f"{APPLIED_JOBSET}/{workload} {verb}" for verb in APPLY_VERBS}


def gcluster_cancel_argv(target: Target) -> list[str]:
    """``gcluster job cancel NAME`` (``cmd/job/cancel.go``: one argument, the flags of
    ``gcluster job``)."""
    return [
        "gcluster",
        "job",
        "cancel",
        target.workload,
        f"--cluster={target.cluster}",
        f"--location={target.zone}",
        f"--project={target.project}",
    ]


@dataclass
class GclusterSubmitter(JobSetSubmitter):
    name: str = GCLUSTER
    kueue: KueueNeeds = KueueNeeds(adapt_with_xpk=False, xpk_configmap=False)

    def cancel(self, target: Target) -> CommandResult:
        return self.runner.run(gcluster_cancel_argv(target), timeout=1800)

    def makes_for_itself(self, workload_policy: str | None) -> str | None:
        return workload_policy

    def script_env(self, project_number: str | None) -> dict[str, str]:  # noqa: ARG002
        return {}

    def says_submitted(self, line: str, workload: str) -> bool:  # noqa: ARG002
        return False  # the script's end says it


def submitter_named(
    name: str,
    xpk: Xpk,
    kubectl: Kubectl | None = None,
    *,
    poll_seconds: float = 10.0,
    clock: Clock = SYSTEM_CLOCK,
) -> Submitter:
    """The submitter a recipe (``plan.recipe.submitter``) or a stored workload names."""
    if name == GCLUSTER:
        return GclusterSubmitter(xpk.runner, poll_seconds, clock)
    return XpkSubmitter(xpk.runner, poll_seconds, clock, xpk, kubectl)


@dataclass
class OwnPolicy:
    """The workload policy a submitter may create for itself, recorded like everything the run
    makes: before the submit, when the run holds no such policy and none exists, as *maybe*
    made; after it, as made or absent by what the cloud then has."""

    store: RunStore
    gcloud: Gcloud
    run_id: str
    project: str
    region: str

    def before_submit(self, submitter: Submitter, workload_policy: str | None) -> int | None:
        """The recorded intent's id, or None when the submit cannot make a policy of its own."""
        policy = submitter.makes_for_itself(workload_policy)
        if policy is None:
            return None
        held = self.store.resources(self.run_id, states=LIVE_STATES)
        if any(r.kind == "workload-policy" and r.name == policy for r in held):
            return None
        if self.gcloud.resource_policy_exists(policy, self.region):
            return None  # there before the submit: not the submitter's, never deleted
        rid = self.store.resource_intent(
            self.run_id,
            kind="workload-policy",
            name=policy,
            project=self.project,
            location=self.region,
            detail={"made_by": f"{submitter.name} (at submit)"},
        )
        self.store.resource_state(rid, ResourceState.MAYBE)
        return rid

    def after_submit(self, rid: int | None, name: str) -> None:
        if rid is None:
            return
        made = self.gcloud.resource_policy_exists(name, self.region)
        self.store.resource_state(rid, ResourceState.CREATED if made else ResourceState.ABSENT)
