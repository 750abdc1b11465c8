"""``metav1.Status`` answers, as the real API server writes them, so kubectl prints its own text
("Error from server (NotFound): jobsets.jobset.x-k8s.io "x" not found")."""

from __future__ import annotations

from typing import Any

from tpu_trainer.simcloud.kube.resources import Resource

JsonObject = dict[str, Any]


class KubeError(Exception):
    """An error answer: HTTP code, reason and message, with ``details`` as the server gives."""

    def __init__(
        self, code: int, reason: str, message: str, details: JsonObject | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> JsonObject:
        body: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(resource: Resource, name: str) -> JsonObject:
    details: JsonObject = {"name": name, "kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return details


def not_found(resource: Resource, name: str) -> KubeError:
    return KubeError(
        404,
        "NotFound",
        f'{resource.group_resource} "{name}" not found',
        _details(resource, name),
    )


def already_exists(resource: Resource, name: str) -> KubeError:
    return KubeError(
        409,
        "AlreadyExists",
        f'{resource.group_resource} "{name}" already exists',
        _details(resource, name),
    )


def conflict(resource: Resource, name: str) -> KubeError:
    return KubeError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.group_resource} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        _details(resource, name),
    )


def invalid(resource: Resource, name: str, causes: list[tuple[str, str, str]]) -> KubeError:
    """422 Invalid; ``causes`` are (field, reason, message), e.g. ("spec.x", "FieldValueRequired",
    "Required value")."""
    text = ", ".join(f"{field}: {message}" for field, _, message in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    qualified = f"{resource.kind}.{resource.group}" if resource.group else resource.kind
    body = _details(resource, name)
    body["kind"] = resource.kind
    body["causes"] = [{"reason": r, "message": f"{m}", "field": f} for f, r, m in causes]
    return KubeError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', body)


def forbidden(
    resource: Resource, name: str, user: str, verb: str, namespace: str | None
) -> KubeError:
    """RBAC's 403: ``User "U" cannot create resource "R" in API group "G" at the cluster
    scope`` (or ``in the namespace "N"``)."""
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    subject = f'{resource.group_resource} "{name}"' if name else resource.group_resource
    return KubeError(
        403,
        "Forbidden",
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource.plural}" in '
        f'API group "{resource.group}" {scope}',
        _details(resource, name),
    )


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def method_not_allowed(verb: str, resource: Resource) -> KubeError:
    return KubeError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({verb})",
        _details(resource, ""),
    )


def unauthorized() -> KubeError:
    """401: no bearer token, or not the cluster's (kubectl: ``You must be logged in to the
    server (Unauthorized)``)."""
    return KubeError(401, "Unauthorized", "Unauthorized")


def path_not_found() -> KubeError:
    return KubeError(404, "NotFound", "the server could not find the requested resource")


def success_status(resource: Resource, name: str, uid: str) -> JsonObject:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**_details(resource, name), "uid": uid},
    }
