"""KubeRay in the fake cluster: RayCluster objects, their token Secret, ``kubectl port-forward``
to the head's dashboard, and ``-o jsonpath=`` output.

Applying a RayCluster checks it against the real CRD (as the API server would, when the CRD
files are there), then plays the operator: the head is ready at once (unless the state's
``ray.head_ready`` is false) and, with ``authOptions.mode: token`` and no ``secretName``, a
Secret named after the cluster holds ``auth_token``. Deleting the cluster deletes that Secret.
``port-forward svc/<cluster>-head-svc`` prints kubectl's ``Forwarding from`` line with the port
in ``ray.dashboard_port`` (where a test runs a dashboard, real or
:class:`~tpu_trainer.fakecloud.ray_dashboard.FakeRayDashboard`) and waits to be stopped.

The state keeps these settings under ``ray`` (see :func:`configure_ray`).
"""

from __future__ import annotations

import base64
import re
import sys
import time
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.common import Answer, StrictParser, ToolExit
from tpu_trainer.fakecloud.state import State, state_path, transaction

RAY_KEY = "ray"
DEFAULT_TOKEN = "fake-ray-token-0123456789abcdef"  # noqa: S105 (the fake cluster's own)
_JSONPATH = re.compile(r"\{\.([A-Za-z0-9_.-]*)\}")


def configure_ray(
    path: Path | str,
    *,
    dashboard_port: int | None = None,
    token: str = DEFAULT_TOKEN,
    head_ready: bool = True,
) -> None:
    """Set the fake KubeRay's behaviour in the state file at ``path``."""
    with transaction(Path(path)) as state:
        state[RAY_KEY] = {
            "dashboard_port": dashboard_port,
            "token": token,
            "head_ready": head_ready,
        }


def _settings(state: State) -> dict[str, Any]:
    found: dict[str, Any] = state.get(RAY_KEY) or {}
    return {"dashboard_port": None, "token": DEFAULT_TOKEN, "head_ready": True, **found}


def _kind(name: str) -> k8s.Kind:
    kind = k8s.find_kind(name)
    assert kind is not None  # noqa: S101 (both kinds are listed in k8s.KINDS)
    return kind


# ---- apply / delete hooks --------------------------------------------------------------------
def check(obj: dict[str, Any], source: str) -> None:
    """The API server's admission of a RayCluster: its CRD's schema (a dry run stops here)."""
    if obj.get("kind") != "RayCluster":
        return
    from tpu_trainer.fakecloud import crd

    name = (obj.get("metadata") or {}).get("name", "")
    if crd.available():
        errors = crd.validate(obj)
        if errors:
            raise ToolExit(
                f'The RayCluster "{name}" is invalid: {"; ".join(errors[:3])} (from {source})\n',
                1,
            )


def admit(state: State, obj: dict[str, Any], source: str) -> None:
    """Check a RayCluster against its CRD, then fill in what the operator would (in ``obj``)."""
    check(obj, source)
    if obj.get("kind") != "RayCluster":
        return
    name = (obj.get("metadata") or {}).get("name", "")
    settings = _settings(state)
    ready = "True" if settings["head_ready"] else "False"
    groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
    workers = sum(int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1)) for g in groups)
    obj["status"] = {
        "state": "ready" if settings["head_ready"] else "",
        "desiredWorkerReplicas": workers,
        "conditions": [
            {"type": "HeadPodReady", "status": ready, "reason": "HeadPodRunningAndReady"},
            {"type": "RayClusterProvisioned", "status": ready},
        ],
    }
    auth = (obj.get("spec") or {}).get("authOptions") or {}
    if auth.get("mode") == "token" and not auth.get("secretName"):
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        token = base64.b64encode(str(settings["token"]).encode()).decode()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "Opaque",
            "data": {"auth_token": token},
        }
        k8s.put(state, secret, namespace)


def deleted(state: State, kind: k8s.Kind, name: str, namespace: str) -> None:
    """The operator's Secret goes with its RayCluster."""
    if kind.kind == "RayCluster":
        state["k8s"].pop(k8s.key(_kind("secret"), name, namespace), None)


# ---- output ------------------------------------------------------------------------------------
def jsonpath(answer: Answer, objs: list[dict[str, Any]], expression: str) -> None:
    """``-o jsonpath=TEMPLATE`` for one object: ``{.a.b}`` fields, other text as it is."""
    if len(objs) != 1:
        raise ToolExit("error: the fake kubectl prints jsonpath for one named object only\n", 1)

    def field(m: re.Match[str]) -> str:
        value: Any = objs[0]
        for part in filter(None, m[1].split(".")):
            value = value.get(part) if isinstance(value, dict) else None
        return "" if value is None else str(value)

    answer.stdout.append(_JSONPATH.sub(field, expression))


# ---- port-forward ------------------------------------------------------------------------------
def _port_forward_args(argv: list[str]) -> tuple[str, str, str]:
    def on_error(message: str) -> Any:
        raise ToolExit(f"error: {message}\n", 1)

    p = StrictParser(on_error, prog="kubectl")
    p.add_argument("verb")
    p.add_argument("target")
    p.add_argument("ports", nargs="+")
    p.add_argument("--context")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--address", default="localhost")
    ns = p.parse_args(argv)
    return ns.target, ns.namespace, ns.ports[0]


def port_forward_main(argv: list[str]) -> int:
    """``kubectl port-forward svc/<cluster>-head-svc [LOCAL]:8265``: runs until stopped."""
    try:
        target, namespace, ports = _port_forward_args(argv)
        kind, _, service = target.partition("/")
        if kind not in ("svc", "service", "services") or not service.endswith("-head-svc"):
            raise ToolExit(f'error: the fake forwards to Ray head services only, not "{target}"\n')
        cluster = service.removesuffix("-head-svc")
        with transaction(state_path(), ["kubectl", *argv]) as state:
            found = k8s.get(state, _kind("raycluster"), cluster, namespace)
            port = _settings(state)["dashboard_port"]
        if found is None:
            raise ToolExit(f'Error from server (NotFound): services "{service}" not found\n')
        if port is None:
            raise ToolExit("error: the fake cluster has no Ray dashboard (configure_ray)\n")
        remote = ports.rpartition(":")[2]
    except ToolExit as e:
        sys.stderr.write(e.stderr)
        return e.code
    sys.stdout.write(f"Forwarding from 127.0.0.1:{port} -> {remote}\n")
    sys.stdout.flush()
    while True:  # like kubectl: until the caller stops it
        time.sleep(3600)
