"""Check Kubernetes custom resources against their real CRDs, as the API server does.

This is the simulated cluster's side: the emulated API server (``simcloud.kube.admission``)
admits objects with it, and the tests check the tool's generated objects
(goldens) with it. The tool itself never validates what it applies by hand: it asks the
cluster (``kubectl apply --dry-run=server``, ``infra.kube_check``).

``validate(obj)`` picks the CRD from the object's group and kind, the schema version from its
``apiVersion``, then emulates what the API server does before it stores an object:

1. applies the schema's ``default:`` values (and drops ``null`` on non-nullable fields);
2. validates with JSON Schema Draft 4, ``nullable: true`` allowing ``null``;
3. in strict mode (``fieldValidation=Strict``) rejects unknown fields: every object schema with
   ``properties`` and no ``additionalProperties`` / ``x-kubernetes-preserve-unknown-fields``
   gets ``additionalProperties: false``;
4. checks ``metadata`` (opaque in a CRD schema) by hand: a valid name, known ObjectMeta fields;
5. checks list-map keys for duplicates and the CEL rules listed in ``_CEL_RULES``, written by
   hand in Python (rules that compare with ``oldSelf`` only apply to updates and are skipped;
   other unlisted rules are skipped too).

CRD files are found through ``CRD_FILES`` (``catalog/crd_releases.yaml``) under
``$TPU_TRAINER_CRDS`` or, without it, the folder shipped in the package
(``tpu_trainer/catalog/crds``, the projects' release files unchanged). ``available()`` is False
only when ``$TPU_TRAINER_CRDS`` names a missing folder; callers then skip the check.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import yaml

from tpu_trainer.catalog.crd_releases import crd_releases
from tpu_trainer.errors import ConfigError, TpuTrainerError

CRD_DIR_ENV = "TPU_TRAINER_CRDS"
SHIPPED_CRDS = Path(__file__).resolve().parents[1] / "catalog" / "crds"
"""The CRDs shipped with the package (see the README there for their releases)."""

CRD_FILES: Mapping[tuple[str, str], str] = {
    (group, kind): file
    for group, release in crd_releases().items()
    for kind, file in release.kinds.items()
}
"""(API group, kind) → CRD file, relative to the CRD folder."""

BUG_FIX = "this is a bug in tpu-trainer: report it"
_MAX_MESSAGE = 200

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

_OBJECT_META: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
        "managedFields": {"type": "array", "items": {"type": "object"}},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "selfLink": {"type": "string"},
    },
}
"""ObjectMeta, which a CRD schema leaves as an opaque ``type: object``."""


# ---- loading ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Crd:
    """One CustomResourceDefinition, as read from its YAML file."""

    path: Path
    group: str
    kind: str
    namespaced: bool
    schemas: Mapping[str, Mapping[str, Any]]
    """Served version name → its ``openAPIV3Schema``."""

    def schema(self, version: str) -> Mapping[str, Any] | None:
        """The schema of a served version, or None."""
        return self.schemas.get(version)


def crd_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$TPU_TRAINER_CRDS``, else the CRDs shipped with the package."""
    env = os.environ if env is None else env
    configured = env.get(CRD_DIR_ENV, "")
    return Path(configured).expanduser() if configured else SHIPPED_CRDS


def available(env: Mapping[str, str] | None = None) -> bool:
    """Whether CRD files can be found to validate against."""
    return crd_dir(env).is_dir()


@functools.cache
def load_crd(path: Path) -> Crd:
    """Read a CRD file once per path (the big ones take a moment to parse)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read CRD file {path}: {exc.strerror or exc}",
            fix=f"point ${CRD_DIR_ENV} at a folder holding {path.parent.name}/{path.name}, "
            "or unset it to use the CRDs shipped with tpu-trainer",
        ) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader, C or pure Python
    if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
        raise ConfigError(
            f"{path} is not a CustomResourceDefinition",
            fix=f"point ${CRD_DIR_ENV} at a folder of CRD files, or unset it",
        )
    spec = doc["spec"]
    schemas = {
        v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served", True)
    }
    return Crd(path, spec["group"], spec["names"]["kind"], spec["scope"] == "Namespaced", schemas)


def crd_for(group: str, kind: str, *, folder: Path | None = None) -> Crd:
    """The CRD of ``kind`` in API ``group``, from the registry ``CRD_FILES``."""
    relative = CRD_FILES.get((group, kind))
    if relative is None:
        known = ", ".join(f"{k} ({g})" for g, k in CRD_FILES)
        raise TpuTrainerError(
            f"no CRD is registered for {kind} in API group '{group}' (known: {known})",
            fix=BUG_FIX,
        )
    return load_crd((folder or crd_dir()) / relative)


def split_api_version(api_version: str) -> tuple[str, str]:
    """``"kueue.x-k8s.io/v1beta1"`` → ``("kueue.x-k8s.io", "v1beta1")``; core ``"v1"`` → ``("", "v1")``."""
    group, _, version = api_version.rpartition("/")
    return group, version


# ---- schema preparation ----------------------------------------------------------------------
def _to_jsonschema(node: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    """Structural schema → Draft 4 schema: nullable, int-or-string, strict objects."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {k: _to_jsonschema(v, strict=strict) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = _to_jsonschema(value, strict=strict)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_to_jsonschema(v, strict=strict) for v in value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if (
        strict
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _format_checker() -> Any:
    checker = jsonschema.FormatChecker(formats=())
    for name, (low, high) in _INT_RANGES.items():

        def in_range(value: object, low: int = low, high: int = high) -> bool:
            return not isinstance(value, int) or isinstance(value, bool) or low <= value <= high

        checker.checks(name)(in_range)
    return checker


@functools.cache
def _validator(path: Path, version: str, strict: bool) -> Any:
    """A compiled Draft 4 validator for one CRD version (cached: the schemas are large)."""
    schema = _to_jsonschema(load_crd(path).schemas[version], strict=strict)
    schema.setdefault("properties", {})["metadata"] = _OBJECT_META
    return jsonschema.Draft4Validator(schema, format_checker=_format_checker())


# ---- defaulting ------------------------------------------------------------------------------
def apply_defaults(obj: Any, schema: Mapping[str, Any]) -> None:
    """Fill schema ``default:`` values into ``obj`` in place, as the API server does.

    A ``null`` on a non-nullable field is dropped first (then defaulted, if it has a default).
    Defaults are applied inside defaulted values too.
    """
    if isinstance(obj, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for key, sub in properties.items():
            if key in obj and obj[key] is None and not sub.get("nullable"):
                del obj[key]
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                apply_defaults(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, value in obj.items():
                if key not in properties:
                    apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for item in obj:
            apply_defaults(item, schema["items"])


# ---- hand-written CEL rules ------------------------------------------------------------------
def _all_borrowing_nil(spec: Mapping[str, Any], cohort_field: str) -> bool:
    if cohort_field in spec or "resourceGroups" not in spec:
        return True
    return all(
        "borrowingLimit" not in r
        for rg in spec["resourceGroups"]
        for f in rg["flavors"]
        for r in f["resources"]
    )


_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_CEL_RULES: Mapping[str, Callable[[Any], bool]] = {
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": lambda s: all(
        len(f["resources"]) == len(s["coveredResources"]) for f in s["flavors"]
    ),
    "!has(self.cohort) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all("
    "f, f.resources.all(r, !has(r.borrowingLimit)))) : true": lambda s: _all_borrowing_nil(
        s, "cohort"
    ),
    "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
    "rg.flavors.all(f, f.resources.all(r, !has(r.borrowingLimit)))) : true": lambda s: (
        _all_borrowing_nil(s, "cohortName")
    ),
    "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && "
    "self.whenCanPreempt == 'TryNextFlavor')": lambda s: (
        "preference" not in s
        or (s.get("whenCanBorrow") == s.get("whenCanPreempt") == "TryNextFlavor")
    ),
    "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
    "self.borrowWithinCohort.policy != 'Never')": lambda s: (
        not (
            s.get("reclaimWithinCohort") == "Never"
            and "borrowWithinCohort" in s
            and s["borrowWithinCohort"].get("policy") != "Never"
        )
    ),
    "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])": lambda s: all(
        x.get("effect") in _TAINT_EFFECTS for x in s
    ),
    "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', "
    "'NoExecute'])": lambda s: all(x.get("effect", "NoSchedule") in _TAINT_EFFECTS for x in s),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda s: (
        "topologyName" not in s or len(s.get("nodeLabels", {})) >= 1
    ),
}
"""CEL rule text (whitespace-normalised) → the same check in Python, on the defaulted node."""


def _normalise_rule(rule: str) -> str:
    return " ".join(rule.split())


def _walk(
    obj: Any, schema: Mapping[str, Any], path: str
) -> Iterator[tuple[Any, Mapping[str, Any], str]]:
    """Every (node, its schema, its path) of ``obj`` that the schema describes."""
    yield obj, schema, path
    if isinstance(obj, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            sub = properties.get(key, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                yield from _walk(value, sub, _join(path, key))
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(obj):
            yield from _walk(item, schema["items"], f"{path}[{index}]")


def _rule_errors(obj: Any, schema: Mapping[str, Any]) -> list[str]:
    """Errors from the hand-written CEL rules and from duplicate list-map keys."""
    errors: list[str] = []
    for node, sub, path in _walk(obj, schema, ""):
        errors.extend(_list_key_errors(node, sub, path))
        for rule in sub.get("x-kubernetes-validations") or ():
            check = _CEL_RULES.get(_normalise_rule(rule["rule"]))
            if check is None:
                continue
            try:
                ok = check(node)
            except (KeyError, TypeError, AttributeError):
                continue  # a structural error the schema check already reports
            if not ok:
                errors.append(f"{path or '<root>'}: {rule.get('message') or rule['rule']}")
    return errors


def _list_key_errors(node: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    list_type = schema.get("x-kubernetes-list-type")
    if not isinstance(node, list) or list_type not in ("map", "set"):
        return []
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    seen: set[str] = set()
    errors: list[str] = []
    for index, item in enumerate(node):
        if list_type == "map" and isinstance(item, dict):
            ident = repr(tuple(item.get(k) for k in keys))
        else:
            ident = repr(item)
        if ident in seen:
            errors.append(f"{path}[{index}]: duplicate entry {ident}")
        seen.add(ident)
    return errors


# ---- metadata --------------------------------------------------------------------------------
def _metadata_errors(metadata: Any, *, namespaced: bool) -> list[str]:
    if not isinstance(metadata, dict):
        return ["metadata: required"]
    errors: list[str] = []
    name = metadata.get("name")
    if not name and not metadata.get("generateName"):
        errors.append("metadata.name: required")
    elif isinstance(name, str) and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
        errors.append(
            f"metadata.name: {name!r} is not a DNS subdomain "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)"
        )
    namespace = metadata.get("namespace")
    if namespace and not namespaced:
        errors.append(
            f"metadata.namespace: a cluster-scoped object has no namespace ({namespace!r})"
        )
    elif isinstance(namespace, str) and (len(namespace) > 63 or not _DNS_LABEL.match(namespace)):
        errors.append(f"metadata.namespace: {namespace!r} is not a DNS label")
    labels = metadata.get("labels")
    for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
        if isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
            errors.append(f"{_join('metadata.labels', key)}: {value!r} is not a valid label value")
    return errors


# ---- validation ------------------------------------------------------------------------------
def _join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    if _IDENTIFIER.match(text):
        return f"{path}.{text}" if path else text
    return f'{path}["{text}"]'


def _schema_error_lines(error: Any) -> list[str]:
    path = ""
    for part in error.absolute_path:
        path = _join(path, part)
    if error.validator == "additionalProperties" and error.validator_value is False:
        properties = error.schema.get("properties") or {}
        unknown = sorted(k for k in error.instance if k not in properties)
        return [f"{_join(path, k)}: unknown field" for k in unknown]
    if error.validator == "anyOf" and error.schema.get("x-kubernetes-int-or-string"):
        message = f"{_short(error.instance)} must be an integer or a string"
    elif error.validator == "type":
        message = f"{_short(error.instance)} is not of type {error.validator_value!r}"
    else:
        message = error.message
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return [f"{path or '<root>'}: {message}"]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(
    obj: Mapping[str, Any], *, strict: bool = True, folder: Path | None = None
) -> list[str]:
    """Readable problems (``"spec.nodeLabel: unknown field"``) of ``obj``; empty when it is valid.

    ``obj`` is not changed: defaults are applied to a copy.
    """
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return ["<root>: apiVersion and kind are required strings"]
    group, version = split_api_version(api_version)
    crd = crd_for(group, kind, folder=folder)
    schema = crd.schema(version)
    if schema is None:
        served = ", ".join(f"{group}/{v}" for v in crd.schemas)
        return [f"apiVersion: {api_version} is not served by {crd.path.name} (served: {served})"]
    doc = copy.deepcopy(dict(obj))
    apply_defaults(doc, schema)
    errors: list[str] = []
    if "metadata" not in doc:
        errors.append("metadata: required")
    else:
        errors.extend(_metadata_errors(doc["metadata"], namespaced=crd.namespaced))
    found = _validator(crd.path, version, strict).iter_errors(doc)
    schema_errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
    for error in schema_errors:
        errors.extend(_schema_error_lines(error))
    errors.extend(_rule_errors(doc, schema))
    return errors
