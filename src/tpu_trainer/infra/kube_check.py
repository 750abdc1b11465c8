"""The cluster's own check of what the tool is about to apply: ``kubectl apply --dry-run=server``.

The objects go to kubectl on standard input (one multi-document YAML stream, one kubectl call
however many objects), with ``--validate=strict``: the API server runs its whole admission —
defaults, the CRD's schema and rules, admission webhooks, RBAC, unknown fields under
``fieldValidation=Strict`` — and persists nothing. What kubectl prints when the server refuses
is read here into :class:`Rejection`\\s (which object, which fields, why) and raised as
:class:`ClusterRefusedError`, whose fix says what to do for that kind of refusal. Pure: the call
itself is :meth:`tpu_trainer.infra.kubectl.Kubectl.check`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tpu_trainer.catalog.crd_releases import crd_releases
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.kube_yaml import dump_all

DRY_RUN_ARGS = ("apply", "--dry-run=server", "--validate=strict", "-f", "-", "-o", "name")
"""kubectl's arguments for the check (the objects on standard input)."""


class Refusal(StrEnum):
    INVALID = "invalid"
    """422: a field breaks the schema or a rule."""
    UNKNOWN_FIELD = "unknown field"
    """400 strict decoding error, or a warning under ``--validate=warn``: no such field."""
    NOT_SERVED = "not served"
    """The cluster has no such kind in that API version (its CRD is missing or older)."""
    REFUSED = "refused"
    """Anything else the server said no to: a webhook, RBAC, a conflict."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """One object the server would not take."""

    kind: str
    name: str
    refusal: Refusal
    problems: tuple[str, ...]
    """``spec.queueingStrategy: Invalid value: ...``, ``unknown field "spec.x"``, ..."""
    group: str = ""

    @property
    def subject(self) -> str:
        return f"{self.kind} {self.name}" if self.name else self.kind

    @property
    def fields(self) -> str:
        """The fields the problems name (``spec.x, spec.y``), or '' when they name none."""
        named = [_field_of(p) for p in self.problems]
        return ", ".join(dict.fromkeys(f for f in named if f))


def _field_of(problem: str) -> str:
    if m := _UNKNOWN_FIELD.match(problem):
        return m["field"]
    head, colon, _ = problem.partition(": ")
    return head if colon and _FIELD_PATH.match(head) else ""


def manifests_text(objects: Sequence[Mapping[str, Any]]) -> str:
    """The objects as one YAML stream (what ``kubectl apply -f -`` reads)."""
    return dump_all(objects)


# ---- reading kubectl's refusals --------------------------------------------------------------
_INVALID_ONE = re.compile(r'^The (?P<kind>\w+) "(?P<name>[^"]*)" is invalid:? ?(?P<rest>.*)$')
_INVALID_IN = re.compile(
    r'(?P<kind>\w+)(?:\.(?P<group>[\w.-]+))? "(?P<name>[^"]*)" is invalid: (?P<rest>.*)$'
)
_STRICT = re.compile(
    r'(?P<kind>\w+) in version "[^"]*" cannot be handled as a \w+: '
    r"strict decoding error: (?P<rest>.*)$"
)
_NOT_SERVED = re.compile(
    r'resource mapping not found for name: "(?P<name>[^"]*)" namespace: "[^"]*" from "[^"]*": '
    r'no matches for kind "(?P<kind>\w+)" in version "(?P<version>[^"]+)"'
)
_FROM_SERVER = re.compile(r"^Error from server \((?P<reason>\w+)\): (?P<rest>.*)$")
_CREATING = re.compile(r'^error when creating "[^"]*": (?P<rest>.*)$')
_MULTILINE_START = ("error when applying patch:", "error when retrieving current configuration of:")
_OBJECT_NAME = re.compile(r'^Name: "(?P<name>[^"]*)", Namespace: "[^"]*"$')
_MULTILINE_END = re.compile(
    r'^(?:for: "[^"]*": error when patching "[^"]*"|from server for: "[^"]*"): (?P<rest>.*)$'
)
_UNKNOWN_FIELD = re.compile(r'^unknown field "(?P<field>[^"]+)"')
_FIELD_PATH = re.compile(r"^[A-Za-z_$][\w$.\-\[\]\"]*$")
_UNKNOWN_WARNING = re.compile(r'^Warning: (?P<what>unknown field "[^"]+")')
_CAUSE_SPLIT = re.compile(r", (?=[A-Za-z_$][\w$.\-\[\]\"]*: )")
_UNKNOWN_SPLIT = re.compile(r", (?=unknown field)")


@dataclass
class _Reader:
    """kubectl's standard error, line by line, against the objects that were sent."""

    sent: Sequence[Mapping[str, Any]]
    found: list[Rejection]
    reason: str = ""
    name: str = ""
    """The object a multi-line message (``error when applying patch:``) is about."""

    def line(self, lines: list[str], i: int) -> None:
        line = lines[i]
        bullets = [b[2:] for b in _bullets(lines, i + 1)]
        if m := _OBJECT_NAME.match(line):
            self.name = m["name"]
        elif m := _INVALID_ONE.match(line):
            self._invalid(m["kind"], m["name"], _causes(m["rest"], bullets), "")
        elif m := _MULTILINE_END.match(line):
            self.message(m["rest"], bullets)
            self.reason = self.name = ""
        elif m := _FROM_SERVER.match(line):
            self.reason = m["reason"]
            if not m["rest"].startswith(_MULTILINE_START):
                created = _CREATING.match(m["rest"])
                self.message(created["rest"] if created else m["rest"], bullets)
                self.reason = ""
        elif m := _NOT_SERVED.search(line):
            problem = f"the cluster does not serve {m['kind']} in {m['version']}"
            group = m["version"].rpartition("/")[0]
            self.found.append(
                Rejection(m["kind"], m["name"], Refusal.NOT_SERVED, (problem,), group)
            )
        elif m := _UNKNOWN_WARNING.match(line):
            kind = str(self.sent[0].get("kind") or "") if len(self.sent) == 1 else ""
            self._add(kind, "", Refusal.UNKNOWN_FIELD, (m["what"],), "")

    def message(self, message: str, bullets: list[str]) -> None:
        """One server message (what follows kubectl's ``error when ... "STDIN":``)."""
        if m := _INVALID_IN.search(message):
            self._invalid(m["kind"], m["name"], _causes(m["rest"], bullets), m["group"] or "")
        elif m := _STRICT.search(message):
            unknown = tuple(_UNKNOWN_SPLIT.split(m["rest"].strip()))
            self._add(m["kind"], self.name, Refusal.UNKNOWN_FIELD, unknown, "")
        else:
            kind = next((str(o["kind"]) for o in self.sent if _mentions(message, o)), "")
            problem = f"{self.reason}: {message}" if self.reason else message
            self._add(kind, self.name, Refusal.REFUSED, (problem,), "")

    def _invalid(self, kind: str, name: str, problems: tuple[str, ...], group: str) -> None:
        self._add(kind, name, Refusal.INVALID, problems, group)

    def _add(
        self, kind: str, name: str, refusal: Refusal, problems: tuple[str, ...], group: str
    ) -> None:
        """A rejection; what the message leaves out is taken from the objects sent (the one of
        its kind, or the only one)."""
        same = [o for o in self.sent if o.get("kind") == kind] if kind else list(self.sent)
        obj = same[0] if len(same) == 1 else None
        if obj is not None:
            kind = kind or str(obj.get("kind") or "")
            name = name or str((obj.get("metadata") or {}).get("name") or "")
            group = group or str(obj.get("apiVersion") or "").rpartition("/")[0]
        self.found.append(Rejection(kind or "one of the objects", name, refusal, problems, group))


def _mentions(message: str, obj: Mapping[str, Any]) -> bool:
    """Whether a server message is about ``obj``'s kind (``ClusterQueue``, or its resource
    ``clusterqueues.kueue.x-k8s.io`` as RBAC names it)."""
    kind = str(obj.get("kind") or "")
    resource = re.compile(rf"\b{re.escape(kind.lower())}s?\b")
    return bool(kind) and (kind in message or resource.search(message) is not None)


def _causes(rest: str, bullets: list[str]) -> tuple[str, ...]:
    """The causes after ``is invalid:``: one, ``[a, b]``, or ``*`` bullets on the next lines."""
    rest = rest.strip()
    if rest.startswith("[") and rest.endswith("]"):
        return tuple(_CAUSE_SPLIT.split(rest[1:-1]))
    return (rest,) if rest else tuple(bullets)


def _bullets(lines: list[str], start: int) -> list[str]:
    out = []
    for line in lines[start:]:
        if not line.startswith("* "):
            break
        out.append(line)
    return out


def rejections(stderr: str, sent: Sequence[Mapping[str, Any]]) -> list[Rejection]:
    """What kubectl's standard error says the server refused (empty when it refused nothing).

    ``sent`` are the objects checked: a message that does not name its object (a strict
    decoding error on create, an unknown-field warning) is put to the one object of its kind.
    """
    reader = _Reader(sent, [])
    lines = stderr.splitlines()
    for i in range(len(lines)):
        reader.line(lines, i)
    return reader.found


# ---- the error -------------------------------------------------------------------------------
def _operator(group: str) -> str:
    release = crd_releases().get(group)
    return release.named if release else "Kubernetes"


def _install(group: str) -> str:
    release = crd_releases().get(group)
    return f" ({release.install})" if release else ""


def _fix(rejection: Rejection) -> str:
    """What to do about one refusal."""
    r, group = rejection, rejection.group
    fields = r.fields or "the fields named above"
    if r.refusal is Refusal.NOT_SERVED:
        return (
            f"install {_operator(group)} or newer on the cluster{_install(group)}: tpu-trainer "
            f"writes {r.kind} for that release"
        )
    if r.refusal is Refusal.UNKNOWN_FIELD:
        return (
            f"the cluster's {r.kind} has no field {fields}: its operator is older than the "
            f"{_operator(group)} tpu-trainer writes for; upgrade it{_install(group)}"
        )
    if r.refusal is Refusal.INVALID:
        edit = f"`kubectl edit {r.kind.lower()} {r.name}`" if r.name else "`kubectl edit`"
        return (
            f"correct {fields}: where the value is the cluster's own (a repair keeps the "
            f"settings it finds), fix it there with {edit}; where tpu-trainer wrote it, "
            "report it as a bug with this message"
        )
    return (
        "the cluster refused it for the reason above (an admission webhook, or your "
        f"permissions: `kubectl auth can-i create {r.kind.lower()}`); fix that and run again"
    )


class ClusterRefusedError(TpuTrainerError):
    """The cluster's server-side dry run refused objects the tool was about to apply."""

    def __init__(self, found: Sequence[Rejection]) -> None:
        lines = []
        for r in found:
            lines.append(f"  {r.subject} ({r.refusal.value}):")
            lines.extend(f"    {p}" for p in r.problems)
        subjects = ", ".join(r.subject for r in found)
        super().__init__(
            f"the cluster refused {subjects} (checked with `kubectl apply --dry-run=server`; "
            "nothing was applied):\n" + "\n".join(lines),
            fix=_fix(found[0]),
        )
        self.rejections = tuple(found)
