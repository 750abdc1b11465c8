"""Google's discovery documents: which REST methods an API has, and the shapes they take.

The documents are the ones ``google-api-python-client`` ships (``discovery_cache/documents``),
the same descriptions Google's own client libraries are generated from. The emulated services
route every request through them: a path no method of the document has is a 404, as on the
real service.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from tpu_trainer.errors import TpuTrainerError

JsonObject = dict[str, Any]


class DiscoveryMissingError(TpuTrainerError):
    """The discovery documents are not installed."""


@dataclass(frozen=True)
class ApiMethod:
    """One REST method: ``container.projects.locations.clusters.nodePools.create``."""

    id: str
    http_method: str
    flat_path: str
    request: str | None
    response: str | None
    parameters: JsonObject
    pattern: re.Pattern[str] = field(compare=False)

    def match(self, path: str) -> dict[str, str] | None:
        m = self.pattern.fullmatch(path)
        return dict(m.groupdict()) if m else None


@dataclass(frozen=True)
class DiscoveryApi:
    """One discovery document, with its methods ready to route."""

    name: str
    version: str
    schemas: JsonObject
    methods: tuple[ApiMethod, ...]

    def route(self, http_method: str, path: str) -> tuple[ApiMethod, dict[str, str]] | None:
        """The method a request is for and its path parameters, or None (the service's 404)."""
        for m in self.methods:
            if m.http_method != http_method:
                continue
            params = m.match(path)
            if params is not None:
                return m, params
        return None

    def method(self, method_id: str) -> ApiMethod:
        for m in self.methods:
            if m.id == method_id:
                return m
        raise KeyError(method_id)

    def enum(self, schema: str, prop: str) -> tuple[str, ...]:
        """The values a string property may take, from the document."""
        values = self.schemas[schema]["properties"][prop].get("enum", [])
        return tuple(str(v) for v in values)


def _path_pattern(flat_path: str) -> re.Pattern[str]:
    out = []
    for part in re.split(r"(\{[^}]+\})", flat_path):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1].lstrip("+")
            out.append(f"(?P<{re.sub(r'[^A-Za-z0-9_]', '_', name)}>[^/]+)")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


def _methods(node: JsonObject) -> list[ApiMethod]:
    found: list[ApiMethod] = []
    for m in node.get("methods", {}).values():
        flat = m.get("flatPath") or m["path"]
        found.append(
            ApiMethod(
                id=m["id"],
                http_method=m["httpMethod"],
                flat_path=flat,
                request=(m.get("request") or {}).get("$ref"),
                response=(m.get("response") or {}).get("$ref"),
                parameters=m.get("parameters", {}),
                pattern=_path_pattern(flat),
            )
        )
    for child in node.get("resources", {}).values():
        found.extend(_methods(child))
    return found


def _document_text(name: str) -> str:
    try:
        docs = resources.files("googleapiclient") / "discovery_cache" / "documents"
    except ModuleNotFoundError as e:
        raise DiscoveryMissingError(
            "Google's discovery documents are not installed",
            fix="install the simulated cloud's dependencies: .venv/bin/pip install "
            "google-api-python-client (bash scripts/setup.sh does it)",
        ) from e
    doc = docs / f"{name}.json"
    if not doc.is_file():
        raise DiscoveryMissingError(
            f"discovery document {name}.json is missing from google-api-python-client",
            fix="install google-api-python-client 2.202 or later",
        )
    return doc.read_text(encoding="utf-8")


@cache
def load_api(name: str) -> DiscoveryApi:
    """``load_api("container.v1beta1")``: parsed once per process."""
    doc = json.loads(_document_text(name))
    methods = _methods(doc)
    # Longer (more specific) templates first, so ``.../nodePools/{id}`` never wins over
    # ``.../nodePools/{id}:setSize``.
    methods.sort(key=lambda m: len(m.flat_path), reverse=True)
    return DiscoveryApi(
        name=doc["name"], version=doc["version"], schemas=doc["schemas"], methods=tuple(methods)
    )
