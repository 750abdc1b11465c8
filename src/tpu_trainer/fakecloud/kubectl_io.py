"""How the fake kubectl reads manifests and label selectors and prints objects."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.common import Answer, ToolExit


def not_found(kind: k8s.Kind, name: str) -> str:
    """``Error from server (NotFound): resourceflavors.kueue.x-k8s.io "NAME" not found``."""
    return f'Error from server (NotFound): {kind.resource} "{name}" not found\n'


def read_manifests(source: str) -> list[dict[str, Any]]:
    """The objects in a JSON or YAML file (``-`` for standard input); ``List`` items unrolled."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError:
        raise ToolExit(f'error: the path "{source}" does not exist\n', 1) from None
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise ToolExit(f"error: error parsing {source}: {e}\n", 1) from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict) or "kind" not in doc:
            raise ToolExit(
                f'error: error validating "{source}": error validating data: '
                "kind not set; if you choose to ignore these errors, turn validation "
                "off with --validate=false\n",
                1,
            )
        out += (doc.get("items") or []) if doc["kind"] == "List" else [doc]
    if not out:
        raise ToolExit("error: no objects passed to apply\n", 1)
    return out


def selector_terms(selector: str | None) -> list[tuple[str, str, str]]:
    """``a=b,c!=d,e`` as (key, op, value) terms; op is ``=``, ``!=`` or ``exists``."""
    terms = []
    for raw in (selector or "").split(","):
        part = raw.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "!=", v.strip()))
        elif "=" in part:
            k, v = part.replace("==", "=").split("=", 1)
            terms.append((k.strip(), "=", v.strip()))
        else:
            terms.append((part, "exists", ""))
    return terms


def selected(objs: list[Any], terms: list[tuple[str, str, str]]) -> list[Any]:
    def keep(obj: Any) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, value in terms:
            if (op == "=" and labels.get(key) != value) or (
                op == "!=" and labels.get(key) == value
            ):
                return False
            if op == "exists" and key not in labels:
                return False
        return True

    return [o for o in objs if keep(o)]


def _pod_row(pod: dict[str, Any]) -> list[str]:
    statuses = pod["status"].get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len(pod["spec"]["containers"])
    phase = pod["status"]["phase"]
    waiting = next(
        (s["state"]["waiting"]["reason"] for s in statuses if "waiting" in s.get("state", {})), None
    )
    shown = {"Succeeded": "Completed", "Failed": "Error"}.get(phase, waiting or phase)
    return [pod["metadata"]["name"], f"{ready}/{total}", shown, "0", "5m"]


def _table(kind: k8s.Kind, objs: list[dict[str, Any]]) -> str:
    if kind.kind == "Pod":
        rows = [["NAME", "READY", "STATUS", "RESTARTS", "AGE"], *(_pod_row(o) for o in objs)]
    elif kind.kind == "ConfigMap":
        rows = [
            ["NAME", "DATA", "AGE"],
            *([o["metadata"]["name"], str(len(o.get("data") or {})), "5m"] for o in objs),
        ]
    else:
        rows = [["NAME", "AGE"], *([o["metadata"]["name"], "5m"] for o in objs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in rows
    )


def print_objects(
    answer: Answer,
    kind: k8s.Kind,
    objs: list[dict[str, Any]],
    output: str | None,
    *,
    single: bool,
    namespace: str | None,
) -> None:
    """Print as ``-o json|yaml|name`` or the default table (one object: the object itself)."""
    data: Any = (
        objs[0]
        if single and objs
        else {
            "apiVersion": "v1",
            "items": objs,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }
    )
    if output == "json":
        answer.out(json.dumps(data, indent=4))
    elif output == "yaml":
        answer.out(yaml.safe_dump(data, sort_keys=True))
    elif output == "name":
        for o in objs:
            answer.out(f"{kind.singular}/{o['metadata']['name']}")
    elif output in (None, "wide"):
        if not objs:
            where = f" in {namespace} namespace" if kind.namespaced and namespace else ""
            answer.err(f"No resources found{where}.")
            return
        answer.out(_table(kind, objs))
    else:
        raise ToolExit(
            f'error: unable to match a printer suitable for the output format "{output}", '
            "allowed formats are: json,name,wide,yaml (in the fake)\n",
            1,
        )
