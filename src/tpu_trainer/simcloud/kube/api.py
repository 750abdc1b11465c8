"""The resource verbs over the state file: get, list, create, update, patch, delete, and the
status subresource. Each request is one ``fakecloud.state.transaction``, in which KubeRay's
RayCluster controller (``raycluster.reconcile``) first catches up."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.fakecloud.state import State, clock, read_state, transaction
from tpu_trainer.simcloud.kube import protobuf, raycluster, store, views
from tpu_trainer.simcloud.kube.admission import admit, check_field_validation
from tpu_trainer.simcloud.kube.patch import APPLY, STRATEGIC, apply_patch, merge_patch
from tpu_trainer.simcloud.kube.resources import Resource, find
from tpu_trainer.simcloud.kube.selectors import field_selector, label_selector
from tpu_trainer.simcloud.kube.status import (
    KubeError,
    bad_request,
    forbidden,
    method_not_allowed,
    path_not_found,
)
from tpu_trainer.simcloud.kube.table import table
from tpu_trainer.simcloud.kube.views import JOBSET_LABEL

Obj = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """What a resource path names: ``/apis/<g>/<v>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]``."""

    resource: Resource
    namespace: str | None
    name: str = ""
    subresource: str = ""


@dataclass
class Answer:
    code: int
    body: Obj
    warnings: list[str] = field(default_factory=list)
    lost: bool = False
    """The change is made but the connection drops before the answer (a scenario's fault)."""


def parse_target(parts: list[str]) -> Target | None:
    """``parts`` after ``/api`` or ``/apis``: ``["v1", "namespaces", "default", "pods"]``..."""
    if not parts:
        return None
    if parts[0] == "v1":
        group, version, rest = "", "v1", parts[1:]
    elif len(parts) >= 2:
        group, version, rest = parts[0], parts[1], parts[2:]
    else:
        return None
    namespace: str | None = None
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and not group and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    resource = find(group, version, rest[0])
    if resource is None:
        return None
    if resource.namespaced and namespace is None and len(rest) > 1:
        return None
    return Target(resource, namespace if resource.namespaced else None, *rest[1:])


def _decode(raw: bytes, content_type: str) -> Any:
    if "protobuf" in content_type:
        return protobuf.decode(raw, content_type)
    try:
        if content_type.startswith(APPLY) or content_type.startswith("application/yaml"):
            return yaml.safe_load(raw.decode())
        return json.loads(raw) if raw else None
    except (ValueError, yaml.YAMLError) as e:
        raise bad_request(f"the body of the request could not be decoded: {e}") from None


@dataclass
class KubeApi:
    """The verbs over the state file at ``state_path``."""

    state_path: Path
    dry_run: bool = False
    """``dryRun=All``: answer as if the change were made, keep the state as it was."""

    def _tx(self, fn: Callable[[State], Answer]) -> Answer:
        if self.dry_run:
            return fn(read_state(self.state_path))
        with transaction(self.state_path) as state:
            raycluster.reconcile(state)  # the operator has caught up before the server answers
            return fn(state)

    def handle(
        self, verb: str, target: Target, query: dict[str, str], raw: bytes, headers: dict[str, str]
    ) -> Answer:
        r = target.resource
        if target.subresource and target.subresource != "status":
            raise path_not_found()
        if verb != "GET" and "patch" not in r.verbs:
            raise method_not_allowed(verb.lower(), r)
        self.dry_run = query.get("dryRun") == "All"
        answer = self._route(verb, target, query, raw, headers)
        if r.warning:
            answer.warnings.insert(0, r.warning)
        return answer

    def _route(
        self, verb: str, t: Target, query: dict[str, str], raw: bytes, headers: dict[str, str]
    ) -> Answer:
        as_table = "as=Table" in headers.get("accept", "")
        if verb == "GET" and not t.name:
            return self._tx(lambda s: self._list(s, t, query, as_table))
        if verb == "GET":
            return self._tx(lambda s: self._get(s, t, as_table))
        validation = check_field_validation(query.get("fieldValidation", ""))
        ctype = headers.get("content-type", "application/json")
        if verb == "POST" and not t.name:
            body = _object(_decode(raw, ctype), t.resource)
            return self._tx(lambda s: self._create(s, t, body, validation))
        if verb == "PUT" and t.name:
            body = _object(_decode(raw, ctype), t.resource)
            return self._tx(lambda s: self._update(s, t, lambda _: body, validation, "update"))
        if verb == "PATCH" and t.name:
            if ctype.startswith(STRATEGIC) and t.resource.schema is not None:
                raise KubeError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                )
            patch = _decode(raw, ctype)
            if ctype.startswith(APPLY):
                return self._tx(
                    lambda s: self._server_side_apply(s, t, _object(patch, t.resource), validation)
                )
            return self._tx(
                lambda s: self._update(s, t, lambda cur: apply_patch(ctype, cur, patch), validation)
            )
        if verb == "DELETE" and t.name:
            orphan = _propagation(raw) == "Orphan"
            return self._tx(lambda s: self._delete(s, t, orphan))
        raise method_not_allowed(verb.lower(), t.resource)

    def _may(self, state: State, t: Target, verb: str, name: str) -> None:
        """RBAC as the scenario has it: its account may not write ``kube_forbidden`` kinds."""
        if t.resource.group_resource in (state.get("behaviours") or {}).get("kube_forbidden", ()):
            user = str(state.get("account") or "system:anonymous")
            raise forbidden(t.resource, name, user, verb, t.namespace)

    def _delete(self, state: State, t: Target, orphan: bool) -> Answer:
        self._may(state, t, "delete", t.name)
        return Answer(
            200, store.delete(state, t.resource, t.namespace or "", t.name, orphan=orphan)
        )

    # ---- verbs -----------------------------------------------------------------------------
    def _get(self, state: State, t: Target, as_table: bool) -> Answer:
        obj = store.get(state, t.resource, t.namespace or "", t.name)
        if as_table and not t.subresource:
            return Answer(
                200, table(t.resource, [obj], clock(state), store.resource_version(state))
            )
        return Answer(200, obj)

    def _list(self, state: State, t: Target, query: dict[str, str], as_table: bool) -> Answer:
        items = store.listing(state, t.resource, t.namespace, _jobset(query))
        if query.get("labelSelector"):
            items = [o for o in items if label_selector(query["labelSelector"])(o)]
        if query.get("fieldSelector"):
            items = [
                o for o in items if field_selector(query["fieldSelector"], t.resource.plural)(o)
            ]
        rv = store.resource_version(state)
        if as_table:
            return Answer(200, table(t.resource, items, clock(state), rv))
        return Answer(
            200,
            {
                "kind": f"{t.resource.kind}List",
                "apiVersion": t.resource.api_version,
                "metadata": {"resourceVersion": rv},
                "items": items,
            },
        )

    def _admit(self, t: Target, obj: Obj, validation: str) -> tuple[Obj, list[str]]:
        # the server's decoder takes what the body leaves out from the request's path (the
        # Kubernetes Python client sends neither field)
        obj["apiVersion"] = obj.get("apiVersion") or t.resource.api_version
        obj["kind"] = obj.get("kind") or t.resource.kind
        if obj.get("apiVersion") != t.resource.api_version or obj.get("kind") != t.resource.kind:
            raise bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({t.resource.api_version})"
            )
        return admit(t.resource, obj, validation)

    def _create(self, state: State, t: Target, obj: Obj, validation: str) -> Answer:
        ns = t.namespace or ""
        body_ns = (obj.get("metadata") or {}).get("namespace")
        if t.resource.namespaced and body_ns and body_ns != ns:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        obj.setdefault("metadata", {}).pop("resourceVersion", None)
        self._may(state, t, "create", str(obj["metadata"].get("name") or ""))
        admitted, warnings = self._admit(t, obj, validation)
        made = Answer(201, store.create(state, t.resource, ns, admitted), warnings)
        made.lost = views.kind_of(t.resource) == "JobSet" and bool(
            (state.get("behaviours") or {}).get("workload_create_fails_after_submit")
        )
        return made

    def _update(
        self,
        state: State,
        t: Target,
        change: Callable[[Obj], Any],
        validation: str,
        verb: str = "patch",
    ) -> Answer:
        ns = t.namespace or ""
        current = store.stored(state, t.resource, ns, t.name)
        self._may(state, t, verb, t.name)
        new = change(current)
        if not isinstance(new, dict):
            raise bad_request("the patched object is not an object")
        admitted, warnings = self._admit(t, new, validation)
        updated = store.replace(
            state, t.resource, ns, t.name, admitted, status=t.subresource == "status"
        )
        return Answer(200, updated, warnings)

    def _server_side_apply(self, state: State, t: Target, obj: Obj, validation: str) -> Answer:
        try:
            store.stored(state, t.resource, t.namespace or "", t.name)
        except KubeError as e:
            if e.code != 404:
                raise
            return self._create(state, t, obj, validation)
        return self._update(state, t, lambda cur: merge_patch(cur, obj), validation)


def _propagation(raw: bytes) -> str:
    """The DeleteOptions' ``propagationPolicy`` (kubectl sends Background by default)."""
    try:
        options = json.loads(raw) if raw else {}
    except ValueError:
        return ""
    return str(options.get("propagationPolicy") or "") if isinstance(options, dict) else ""


def _jobset(query: dict[str, str]) -> str | None:
    """The JobSet a label selector names (``jobset.sigs.k8s.io/jobset-name=X``), if one."""
    for term in query.get("labelSelector", "").split(","):
        key, _, value = term.replace("==", "=").partition("=")
        if key.strip() == JOBSET_LABEL and not key.endswith("!"):
            return value.strip()
    return None


def _object(body: Any, resource: Resource) -> Obj:
    if not isinstance(body, dict):
        raise bad_request(f"the body of the request is not a {resource.kind} object")
    return body
