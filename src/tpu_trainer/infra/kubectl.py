"""kubectl, asked for JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.kube_check import (
    DRY_RUN_ARGS,
    ClusterRefusedError,
    manifests_text,
    rejections,
)
from tpu_trainer.infra.runner import CommandFailed, CommandResult, CommandRunner

KUBECTL_INSTALL = (
    "install kubectl (https://kubernetes.io/docs/tasks/tools/#kubectl, or "
    "`gcloud components install kubectl`) and put it on PATH"
)


class KubectlMissingError(TpuTrainerError):
    """kubectl is not installed."""


def find_kubectl(env: Mapping[str, str], *, skip: Path | None = None) -> str:
    """The kubectl on ``env``'s PATH (leaving out the folder ``skip``), or an error naming how
    to install it."""
    path = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and (skip is None or Path(p) != skip)
    )
    found = shutil.which("kubectl", path=path)
    if found is None:
        raise KubectlMissingError(
            "kubectl is not installed: the tool reaches GKE clusters through it",
            fix=KUBECTL_INSTALL,
        )
    return found


def _not_found(result: CommandResult) -> bool:
    return "NotFound" in result.stderr or "not found" in result.stderr


def _json_object(result: CommandResult) -> dict[str, Any]:
    """The JSON object ``result`` printed; a clear error naming the command otherwise."""
    try:
        obj = json.loads(result.stdout)
    except ValueError as exc:
        problem = f"output that is not JSON ({exc})"
    else:
        if isinstance(obj, dict):
            return obj
        problem = f"JSON that is not an object ({type(obj).__name__})"
    raise TpuTrainerError(
        f"`{' '.join(result.argv)}` printed {problem}: {result.stdout[:200]!r}",
        fix="run the command yourself to see what it prints; check that kubectl and its "
        "context are working",
    )


@dataclass
class Kubectl:
    runner: CommandRunner
    context: str | None = None
    access: KubeAccess | None = None
    """The cluster whose credentials are fetched before the first command (None: kubectl's
    current context as it is)."""

    def argv(self, *args: str) -> list[str]:
        """The argv of ``kubectl ARGS`` on this cluster, to run now: the cluster's credentials
        are fetched first (once per process), and the command names the context they made, so
        a user switching kubectl's current context meanwhile does not move the run."""
        context = self.context
        if self.access is not None:
            self.access.ensure(self.runner)
            context = context or self.access.context
        return ["kubectl", *([f"--context={context}"] if context else []), *args]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        ns = [f"--namespace={namespace}"] if namespace else []
        r = self.runner.run(self.argv("get", kind, name, *ns, "-o", "json"), timeout=120)
        if not r.ok:
            if _not_found(r):
                return None
            raise CommandFailed(
                r, fix="check `kubectl config current-context` points at the cluster"
            )
        return _json_object(r)

    def list_objects(
        self,
        kind: str,
        *,
        selector: str | None = None,
        namespace: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        """``kubectl get KIND -o json`` items, by label ``selector`` and field selector
        ``fields`` (``involvedObject.kind=Node,reason=Shutdown``)."""
        args = ["get", kind, "-o", "json"]
        if selector:
            args.append(f"--selector={selector}")
        if fields:
            args.append(f"--field-selector={fields}")
        if namespace:
            args.append(f"--namespace={namespace}")
        r = self.runner.run(self.argv(*args), timeout=120)
        if not r.ok:
            raise CommandFailed(r)
        items = _json_object(r).get("items", [])
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise TpuTrainerError(
                f"`{' '.join(r.argv)}` printed JSON whose items are not a list of objects",
                fix="run the command yourself to see what it prints",
            )
        return items

    def check(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """The cluster's own check of applying ``objects``: one ``kubectl apply
        --dry-run=server --validate=strict -f -`` of them all (nothing is persisted). Raises
        :class:`ClusterRefusedError` naming each object and field the server refused, or
        :class:`CommandFailed` when kubectl failed otherwise (no cluster, no credentials).
        Under the tool's ``--dry-run`` the command is only printed."""
        result = self.runner.run(
            self.argv(*DRY_RUN_ARGS), stdin=manifests_text(objects), timeout=120
        )
        if not result.ran:
            return
        refused = rejections(result.stderr, objects)
        if refused:
            raise ClusterRefusedError(refused)
        if not result.ok:
            raise CommandFailed(
                result, fix="check that kubectl reaches the cluster: `kubectl get namespaces`"
            )

    def apply(self, obj: Mapping[str, Any]) -> CommandResult:
        """``kubectl apply -f -`` of one object, sent on standard input (checked first with
        :meth:`check` by the caller)."""
        return self.runner.run(
            self.argv("apply", "-f", "-", "-o", "json"), stdin=json.dumps(obj), timeout=120
        )

    def delete(self, kind: str, name: str, namespace: str | None = None) -> CommandResult:
        """``kubectl delete KIND NAME``: what it owns goes with it (in the background)."""
        ns = [f"--namespace={namespace}"] if namespace else []
        return self.runner.run(self.argv("delete", kind, name, *ns), timeout=600)

    def patch_merge(
        self, kind: str, name: str, body: dict[str, Any], namespace: str | None = None
    ) -> CommandResult:
        ns = [f"--namespace={namespace}"] if namespace else []
        return self.runner.run(
            self.argv(
                "patch",
                kind,
                name,
                *ns,
                "--type",
                "merge",
                "-p",
                json.dumps(body, separators=(",", ":")),
            ),
            timeout=120,
        )

    def logs_argv(
        self,
        pod: str,
        container: str | None = None,
        *,
        follow: bool = False,
        namespace: str | None = None,
        timestamps: bool = False,
    ) -> list[str]:
        """``kubectl logs``; with ``timestamps`` each line comes behind the time it was
        written (:func:`split_timestamp` reads it)."""
        args = ["logs", pod]
        if container:
            args.append(f"--container={container}")
        if follow:
            args.append("--follow")
        if timestamps:
            args.append("--timestamps")
        if namespace:
            args.append(f"--namespace={namespace}")
        return self.argv(*args)


def tails_argv(selector: str, container: str, tail: int) -> list[str]:
    """The args of one ``kubectl logs`` that reads the last ``tail`` lines of every pod the
    label ``selector`` picks (one after another, in one process), each line behind its time and
    ``[pod/NAME/CONTAINER]`` (:func:`split_prefix`); a pod whose log cannot be read is skipped
    (``--ignore-errors``) instead of ending the command."""
    return [
        "logs",
        f"--selector={selector}",
        f"--container={container}",
        "--prefix",
        "--ignore-errors",
        "--timestamps",
        f"--tail={tail}",
    ]


_PREFIX = re.compile(r"\[pod/([^/\]]+)/[^\]]*\] ?")


def split_prefix(line: str) -> tuple[str | None, str]:
    """A ``kubectl logs --prefix`` line as (its pod's name, the rest); (None, line) without
    the prefix (kubectl's own ``error:`` lines)."""
    m = _PREFIX.match(line)
    if m is None:
        return None, line
    return m.group(1), line[m.end() :]


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ")


def split_timestamp(line: str) -> tuple[float | None, str]:
    """A ``kubectl logs --timestamps`` line as (the epoch seconds it was written, the line);
    a line without the RFC 3339 prefix (``2026-11-22T04:27:31.120000000Z ``) is (None, line)."""
    m = _STAMP.match(line)
    if m is None:
        return None, line
    zone = "+00:00" if m[3] == "Z" else m[3]
    try:
        when = datetime.fromisoformat(m[1] + zone)
    except ValueError:
        return None, line
    return when.timestamp() + float(f"0.{m[2] or 0}"), line[m.end() :]
