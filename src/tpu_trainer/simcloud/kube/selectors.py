"""``labelSelector`` and ``fieldSelector`` query parameters, parsed once and matched."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tpu_trainer.simcloud.kube.status import bad_request

Match = Callable[[Mapping[str, Any]], bool]
_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_FIELDS = ("metadata.name", "metadata.namespace")
_KIND_FIELDS = {
    "pods": ("status.phase", "spec.nodeName", "spec.restartPolicy", "status.podIP"),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "nodes": ("spec.unschedulable",),
    "namespaces": ("status.phase",),
}
"""The fields each kind's real server also selects on, besides name and namespace."""


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _requirement(term: str) -> Callable[[Mapping[str, str]], bool]:
    in_set = _SET.match(term)
    if in_set:
        key, op = in_set[1], in_set[2]
        values = {v.strip() for v in in_set[3].split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in term:
            key, _, value = (s.strip() for s in term.partition(op))
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    if re.match(r"^[A-Za-z0-9][-A-Za-z0-9_./]*$", term):
        return lambda labels: term in labels
    raise bad_request(f"unable to parse requirement: {term!r}")


def label_selector(text: str) -> Match:
    terms = [_requirement(t) for t in _split(text)]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return match


def _value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def field_selector(text: str, kind: str) -> Match:
    terms: list[tuple[str, bool, str]] = []
    for term in _split(text):
        negate = "!=" in term
        key, _, value = term.partition("!=" if negate else "==" if "==" in term else "=")
        key = key.strip()
        if key not in _FIELDS + _KIND_FIELDS.get(kind, ()):
            raise bad_request(
                f'"{key}" is not a known field selector for {kind}: only '
                '"metadata.name", "metadata.namespace"'
            )
        terms.append((key, negate, value.strip()))

    def match(obj: Mapping[str, Any]) -> bool:
        return all((_value(obj, k) == v) != neg for k, neg, v in terms)

    return match
