"""A RayCluster on GKE through kubectl: create (recorded first), wait for its head, reach its
dashboard through ``kubectl port-forward``, read its token, delete.

Every call goes through the one command runner. The token is read with a ``token:`` label in
front of it, which the runner's redaction masks before a command's output is recorded; it is
kept in memory only.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tpu_trainer.app.display import Display
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Expired, Pending, Tick, wait_until
from tpu_trainer.infra.ray_jobs import TOKEN_ENV
from tpu_trainer.infra.runner import CommandFailed, CommandResult, CommandRunner
from tpu_trainer.launchers.gke.teardown import Teardown, TeardownReport
from tpu_trainer.launchers.kuberay.lost_workers import (
    NODE_SHUTDOWN,
    deleted_failed,
    hosts_of,
    lost_deleted,
    lost_pod,
    said,
    shut_down_nodes,
)
from tpu_trainer.launchers.kuberay.manifests import (
    DASHBOARD_PORT,
    WORKER_GROUP,
    KubeRayPlan,
    head_service,
)
from tpu_trainer.store.db import Resource, ResourceState, RunStore

RAYCLUSTER = "raycluster"
CONFIGMAP = "configmap"
KINDS = (RAYCLUSTER, CONFIGMAP)
"""Store kinds of what a KubeRay run creates (deleted in reverse order of creation)."""
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> ")
_TOKEN = re.compile(r"token:(\S+)")


def namespaced(kubectl: Kubectl, *args: str, namespace: str) -> list[str]:
    """A kubectl argv (with the context, if any) in ``namespace``, to run now."""
    return kubectl.argv(*args, f"--namespace={namespace}")


def delete_argv(kubectl: Kubectl, kind: str, name: str, namespace: str) -> list[str]:
    return namespaced(kubectl, "delete", kind, name, namespace=namespace)


def token_argv(kubectl: Kubectl, secret: str, namespace: str) -> list[str]:
    """Read the operator's token Secret, labelled so that recorded output is masked."""
    return namespaced(
        kubectl,
        "get",
        "secret",
        secret,
        "-o",
        "jsonpath=token:{.data.auth_token}",
        namespace=namespace,
    )


def head_ready(cluster: dict[str, Any]) -> bool:
    """KubeRay's ``HeadPodReady`` condition (``status.state: ready`` needs every worker too,
    and TPU workers may never come: that is the job's start deadline to judge)."""
    status = cluster.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "HeadPodReady":
            return bool(cond.get("status") == "True")
    return status.get("state") == "ready"


def port_from(line: str) -> int | None:
    m = _FORWARDING.search(line)
    return int(m[1]) if m else None


def decode_token(stdout: str) -> str | None:
    m = _TOKEN.search(stdout)
    if m is None:
        return None
    try:
        return base64.b64decode(m[1], validate=True).decode("utf-8").strip() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


@dataclass
class KubeRayCluster:
    kubectl: Kubectl
    runner: CommandRunner
    store: RunStore
    display: Display
    run_id: str
    project: str
    cluster: str | None
    """The GKE cluster's name, for the store's record."""

    def create(self, kplan: KubeRayPlan) -> None:
        """The cluster checks both objects (one server-side dry run), then each is recorded
        and applied: the entry ConfigMap, then the RayCluster that mounts it."""
        self.kubectl.check(kplan.objects)
        for obj in kplan.objects:
            kind = RAYCLUSTER if obj["kind"] == "RayCluster" else CONFIGMAP
            name = obj["metadata"]["name"]
            rid = self.store.resource_intent(
                self.run_id,
                kind=kind,
                name=name,
                project=self.project,
                location=kplan.namespace,
                cluster=self.cluster,
                detail={"namespace": kplan.namespace, "context": self.kubectl.context},
            )
            result = self.kubectl.apply(obj)
            if not result.ok:
                self.store.resource_state(rid, ResourceState.ABSENT, error=result.text()[-500:])
                raise CommandFailed(
                    result,
                    fix="check `kubectl config current-context` and that "
                    "the cluster has the Ray operator (KubeRay)",
                )
            self.store.resource_state(rid, ResourceState.CREATED)
            self.display.info(f"created {obj['kind']} {name}")

    def wait_head(
        self, kplan: KubeRayPlan, timeout_s: float, poll_s: float, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        def check(_tick: Tick) -> bool | Pending:
            found = self.kubectl.get(RAYCLUSTER, kplan.name, kplan.namespace)
            if found is None:
                raise TpuTrainerError(
                    f"RayCluster {kplan.name} is gone",
                    fix="see `kubectl get events` in the namespace; something deleted it",
                )
            if head_ready(found):
                return True
            state = (found.get("status") or {}).get("state") or "no state yet"
            return Pending(f"RayCluster {kplan.name}: head not ready ({state})", state)

        ready = wait_until(
            check, interval=poll_s, timeout=timeout_s, on_tick=self.display.waiting, clock=clock
        )
        if isinstance(ready, Expired):
            raise TpuTrainerError(
                f"the head of RayCluster {kplan.name} was not ready within {timeout_s:.0f} s "
                f"(state: {ready.last.status})",
                fix=f"`kubectl describe pod -l ray.io/cluster={kplan.name},ray.io/node-type=head "
                f"--namespace={kplan.namespace}` says why (image pull, CPU or memory)",
            )

    def taken_back(self, kplan: KubeRayPlan) -> str | None:
        """The cluster's word that the RayCluster's TPU workers lost their capacity (a pod
        Kubernetes took away: preemption, maintenance, node shutdown), else None: the worker
        pods while they are there, else the namespace's Events (``lost_workers``)."""
        selector = f"ray.io/cluster={kplan.name},ray.io/group={WORKER_GROUP}"
        try:
            pods = self.kubectl.list_objects("pods", selector=selector, namespace=kplan.namespace)
            lost = [why for why in map(lost_pod, pods) if why is not None]
            return said(lost or self._lost_in_events(kplan))
        except TpuTrainerError:
            return None  # the cluster cannot say: the job's own ending stands

    def _lost_in_events(self, kplan: KubeRayPlan) -> list[str]:
        """The worker pods KubeRay deleted as ``Failed`` (already made again), and whether
        their nodes shut down, from the Events about this RayCluster and its pods."""
        cluster = self.kubectl.get(RAYCLUSTER, kplan.name, kplan.namespace)
        uid = str(((cluster or {}).get("metadata") or {}).get("uid") or "")
        if not uid:
            return []
        events = self.kubectl.list_objects("events", namespace=kplan.namespace)
        pods = deleted_failed(events, uid)
        if not pods:
            return []
        hosts = hosts_of(events, pods)
        if kplan.namespace != "default" and hosts:  # a node's events are kept in default
            events = self.kubectl.list_objects(
                "events",
                namespace="default",
                fields=f"involvedObject.kind=Node,reason={NODE_SHUTDOWN}",
            )
        down = shut_down_nodes(events)
        return [lost_deleted(pod, hosts.get(pod), down) for pod in pods]

    def token(self, kplan: KubeRayPlan, env: dict[str, str]) -> str:
        """``$RAY_AUTH_TOKEN``, else the token in the Secret the operator made for the cluster."""
        if env.get(TOKEN_ENV):
            return env[TOKEN_ENV]
        result = self.runner.run(token_argv(self.kubectl, kplan.name, kplan.namespace), timeout=120)
        token = decode_token(result.stdout) if result.ok else None
        if token is None:
            raise TpuTrainerError(
                f"no Ray token in Secret {kplan.name} (namespace {kplan.namespace})",
                fix=f"set {TOKEN_ENV}, or check that the Ray operator is v1.5.1 or newer "
                "(it makes the Secret for `authOptions.mode: token`)",
            )
        return token

    @contextmanager
    def dashboard(self, kplan: KubeRayPlan, timeout_s: float = 60.0) -> Iterator[str]:
        """``kubectl port-forward`` to the head's dashboard for as long as the block runs;
        yields ``http://127.0.0.1:<port>``."""
        argv = namespaced(
            self.kubectl,
            "port-forward",
            f"svc/{head_service(kplan.name)}",
            f":{DASHBOARD_PORT}",
            "--address=127.0.0.1",
            namespace=kplan.namespace,
        )
        cancel, ready = threading.Event(), threading.Event()
        port: list[int] = []
        ended: list[CommandResult] = []

        def on_line(_: str, line: str) -> None:
            found = port_from(line)
            if found is not None and not port:
                port.append(found)
                ready.set()

        def forward() -> None:
            ended.append(self.runner.run(argv, on_line=on_line, cancel=cancel, timeout=30 * 86400))
            ready.set()

        thread = threading.Thread(target=forward, name="port-forward", daemon=True)
        thread.start()
        try:
            ready.wait(timeout_s)
            if not port:
                detail = ended[0].text()[-300:] if ended else f"no port within {timeout_s:.0f} s"
                raise TpuTrainerError(
                    f"`kubectl port-forward svc/{head_service(kplan.name)}` failed: {detail}",
                    fix="check that the head's Service exists: "
                    f"`kubectl get svc {head_service(kplan.name)} --namespace={kplan.namespace}`",
                )
            yield f"http://127.0.0.1:{port[0]}"
        finally:
            cancel.set()
            thread.join(timeout=15)


@dataclass
class KubeRayTeardown(Teardown):
    """Teardown that also deletes RayClusters and their ConfigMaps (with kubectl)."""

    kubectl: Kubectl

    def _delete(self, res: Resource, report: TeardownReport) -> None:
        if res.kind not in KINDS:
            super()._delete(res, report)
            return
        self._mark_deleting(res)
        namespace = str(res.detail.get("namespace") or res.location or "default")
        context = res.detail.get("context")
        kubectl = (
            Kubectl(self.kubectl.runner, str(context), self.kubectl.access)
            if context
            else self.kubectl
        )
        result = kubectl.runner.run(
            delete_argv(kubectl, res.kind, res.name, namespace), timeout=900
        )
        self._settle(res, report, result)
