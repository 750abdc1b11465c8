"""What the API server does to a custom resource before it stores it: the failure policy rule
names JobSet's defaulting webhook gives, defaults from the CRD's schema, unknown fields by the
request's ``fieldValidation`` (Strict: a 400 naming them; Warn: a warning each; Ignore: dropped
silently; they are pruned either way), then the schema (a 422 Invalid with one cause per
problem). The checks themselves are ``fakecloud.crd``'s."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from tpu_trainer.fakecloud.crd import apply_defaults, validate
from tpu_trainer.simcloud.kube.resources import Resource
from tpu_trainer.simcloud.kube.status import KubeError, bad_request, invalid

_REQUIRED = re.compile(r"^(?P<path>.*): '(?P<key>[^']+)' is a required property$")
_UNKNOWN = ": unknown field"


def _field(path: str, key: str) -> str:
    if path in ("", "<root>"):
        return key
    return f"{path}.{key}" if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key) else f'{path}["{key}"]'


def _cause(line: str) -> tuple[str, str, str]:
    required = _REQUIRED.match(line)
    if required:
        return _field(required["path"], required["key"]), "FieldValueRequired", "Required value"
    path, _, message = line.partition(": ")
    return path, "FieldValueInvalid", f"Invalid value: {message}"


def prune(obj: Any, schema: Mapping[str, Any]) -> None:
    """Drop fields the schema does not declare, in place (``metadata`` is left alone)."""
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key in list(obj):
            sub = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is None:
                if properties and not extra and key not in ("apiVersion", "kind", "metadata"):
                    del obj[key]
            elif key != "metadata":
                prune(obj[key], sub)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for item in obj:
            prune(item, schema["items"])


def admit(
    resource: Resource, obj: dict[str, Any], field_validation: str
) -> tuple[dict[str, Any], list[str]]:
    """The object as it will be stored, and the warnings to answer with; raises the real errors."""
    if resource.schema is None:
        return obj, []
    obj = _jobset_webhook(resource, obj)
    name = str((obj.get("metadata") or {}).get("name") or "")
    loose = validate(obj, strict=False)
    unknown = [line for line in validate(obj, strict=True) if line.endswith(_UNKNOWN)]
    fields = [f'unknown field "{line[: -len(_UNKNOWN)]}"' for line in unknown]
    mode = field_validation or "Warn"
    if fields and mode == "Strict":
        raise bad_request(
            f'{resource.kind} in version "{resource.version}" cannot be handled as a '
            f"{resource.kind}: strict decoding error: {', '.join(fields)}"
        )
    if loose:
        raise invalid(resource, name, [_cause(line) for line in loose])
    stored = copy.deepcopy(obj)
    apply_defaults(stored, resource.schema)
    prune(stored, resource.schema)
    return stored, fields if mode == "Warn" else []


def _jobset_webhook(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """What JobSet's defaulting webhook adds before the schema is checked: the name
    ``failurePolicyRule<N>`` of each failure policy rule that has none (xpk's have none)."""
    policy = (obj.get("spec") or {}).get("failurePolicy") if resource.kind == "JobSet" else None
    rules = policy.get("rules") if isinstance(policy, dict) else None
    if not isinstance(rules, list):
        return obj
    obj = copy.deepcopy(obj)
    for n, rule in enumerate(obj["spec"]["failurePolicy"]["rules"]):
        if isinstance(rule, dict) and not rule.get("name"):
            rule["name"] = f"failurePolicyRule{n}"
    return obj


def check_field_validation(value: str) -> str:
    if value not in ("", "Strict", "Warn", "Ignore"):
        raise KubeError(
            400,
            "BadRequest",
            f'fieldValidation parameter unsupported: "{value}", valid values are: '
            '"Ignore", "Warn", "Strict"',
        )
    return value
