"""The configuration: typed, validated once, each value remembering where it came from."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Reservation:
    """A TPU reservation, tried in the order the configuration lists them."""

    name: str
    zone: str | None = None
    """Known zone, if the configuration names one (otherwise asked of gcloud)."""
    project: str | None = None
    """Owner project of a shared reservation, if not the configured project."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value came from: a file and line, or a rule."""

    where: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.where}:{self.line}" if self.line else self.where


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """What the tool needs to know about the user's Google Cloud set-up.

    Nothing here has a built-in value: every project value comes from the user's file.
    """

    project_id: str
    """Google Cloud project that owns the cluster."""
    cluster_name: str
    """GKE cluster that runs the workloads."""
    reservations: tuple[Reservation, ...]
    """TPU reservations, in priority order."""
    default_zone: str
    """Zone used when no reservation says otherwise (e.g. us-central1-ai1a)."""
    region: str
    """Region of the (regional) cluster; derived from default_zone when not given."""
    base_output_dir: str
    """Where MaxText writes its output (gs://...)."""
    workload_image: str
    """Container image that runs the training program."""
    tpu_recipes_path: Path | None = None
    """Local checkout of tpu-recipes, for requests by model name."""
    maxtext_branch: str | None = None
    """MaxText branch the image is built from."""
    jax_version: str | None = None
    libtpu_version: str | None = None
    machine_type: str | None = None
    """GKE machine type override (e.g. tpu7x-ultranet-4t); otherwise the family's standard one."""
    sources: Mapping[str, Source] = field(default_factory=dict)
    """Where each key's value came from."""
    path: Path | None = None
    """The file this configuration was read from."""


@dataclass(frozen=True, slots=True)
class _Key:
    name: str
    required: bool
    help: str
    pattern: re.Pattern[str] | None = None
    example: str = ""


_SAFE_VALUE = re.compile(r"^[^\s'\"`$\\;&|<>(){}]+$")

KEYS: tuple[_Key, ...] = (
    _Key(
        "project_id",
        True,
        "Google Cloud project ID",
        re.compile(r"^(?:[a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$"),
        "my-project",
    ),
    _Key(
        "cluster_name",
        True,
        "GKE cluster name",
        re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$"),
        "my-tpu-cluster",
    ),
    _Key(
        "reservations",
        True,
        "TPU reservations in priority order (names, or {name, zone})",
        None,
        "[my-reservation-1, my-reservation-2]",
    ),
    _Key(
        "default_zone",
        True,
        "zone to use when a reservation does not say",
        re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z0-9]+$"),
        "us-central1-ai1a",
    ),
    _Key(
        "region",
        False,
        "region of the cluster (default: from default_zone)",
        re.compile(r"^[a-z]+-[a-z]+[0-9]+$"),
        "us-central1",
    ),
    _Key(
        "base_output_dir",
        True,
        "output directory for MaxText (gs://bucket/path)",
        re.compile(
            r"^(gs://[a-z0-9][a-z0-9._-]{1,221}[a-z0-9](/[A-Za-z0-9_./:=,+@%^-]*)?|/[A-Za-z0-9_./:=,+@%^-]*)$"
        ),
        "gs://my-bucket/maxtext-runs",
    ),
    _Key(
        "workload_image",
        True,
        "container image for the workload",
        re.compile(
            r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]+|@sha256:[a-f0-9]{64})?$"
        ),
        "gcr.io/my-project/maxtext-runner",
    ),
    _Key("tpu_recipes_path", False, "local checkout of tpu-recipes", None, "~/tpu-recipes"),
    _Key("maxtext_branch", False, "MaxText branch for the image build", _SAFE_VALUE, "main"),
    _Key(
        "jax_version",
        False,
        "JAX version for the image build",
        re.compile(r"^[0-9][0-9a-z.+-]*$"),
        "0.8.1",
    ),
    _Key(
        "libtpu_version",
        False,
        "libtpu version for the image build",
        re.compile(r"^[0-9][0-9a-z.+-]*$"),
        "0.0.31",
    ),
    _Key(
        "machine_type",
        False,
        "GKE machine type override",
        re.compile(r"^[a-z0-9-]+$"),
        "tpu7x-ultranet-4t",
    ),
)
KEY_NAMES = tuple(k.name for k in KEYS)


def short(value: str, limit: int = 80) -> str:
    """``value`` for a message: control characters visible, at most ``limit`` characters."""
    text = value.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 1] + f"… ({len(value)} characters)"


def _fail(source: str, key: str, problem: str, fix: str, line: int | None = None) -> ConfigError:
    where = f"{source}:{line}" if line else source
    return ConfigError(f"{where}: {key}: {problem}", fix=fix)


def _text(raw: Any, key: _Key, source: str, line: int | None) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _fail(
            source,
            key.name,
            f"expected text, got {type(raw).__name__}",
            f"write it as `{key.name}: {key.example}`",
            line,
        )
    value = str(raw).strip()
    if key.pattern is not None and not key.pattern.match(value):
        raise _fail(
            source,
            key.name,
            f"'{short(value)}' is not a valid {key.help}",
            f"write it like `{key.name}: {key.example}`",
            line,
        )
    return value


def _reservations(raw: Any, source: str, line: int | None) -> tuple[Reservation, ...]:
    fix = (
        "write `reservations:` as a list, highest priority first, e.g. "
        "`reservations: [res-a, {name: res-b, zone: us-central1-c}]`"
    )
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise _fail(source, "reservations", "needs at least one reservation", fix, line)
    name_re = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    out: list[Reservation] = []
    for entry in raw:
        item = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _fail(source, "reservations", f"entry {short(repr(item))} has no name", fix, line)
        unknown = set(item) - {"name", "zone", "project"}
        if unknown:
            raise _fail(
                source, "reservations", f"unknown field(s) {short(str(sorted(unknown)))}", fix, line
            )
        name = item["name"].strip()
        if not name_re.match(name):
            raise _fail(
                source, "reservations", f"'{short(name)}' is not a reservation name", fix, line
            )
        zone = item.get("zone")
        if zone is not None and not re.match(r"^[a-z]+-[a-z]+[0-9]+-[a-z0-9]+$", str(zone)):
            raise _fail(
                source,
                "reservations",
                f"zone '{short(str(zone))}' of {short(name)} is not a zone",
                fix,
                line,
            )
        project = item.get("project")
        out.append(
            Reservation(name, str(zone) if zone else None, str(project) if project else None)
        )
    return tuple(out)


def config_from_mapping(
    data: Mapping[str, Any],
    source: str,
    lines: Mapping[str, int] | None = None,
    *,
    require: bool = True,
) -> Config:
    """Validate ``data`` (a parsed YAML mapping) into a :class:`Config`.

    ``source`` names the file in errors; ``lines`` gives each key's line.
    """
    lines = lines or {}
    for name in data:
        if name not in KEY_NAMES:
            close = difflib.get_close_matches(str(name), KEY_NAMES, n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(KEY_NAMES)}"
            raise _fail(source, short(str(name)), "unknown key", hint, lines.get(str(name)))
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key in KEYS:
        raw = data.get(key.name)
        line = lines.get(key.name)
        if raw is None or raw == "":
            if key.required and require:
                raise _fail(
                    source,
                    key.name,
                    "missing",
                    f"add `{key.name}: {key.example}` ({key.help}) to {source}",
                )
            continue
        if key.name == "reservations":
            values[key.name] = _reservations(raw, source, line)
        elif key.name == "tpu_recipes_path":
            values[key.name] = Path(_text(raw, key, source, line)).expanduser()
        else:
            values[key.name] = _text(raw, key, source, line)
        sources[key.name] = Source(source, line)
    if "region" not in values and "default_zone" in values:
        values["region"] = values["default_zone"].rsplit("-", 1)[0]
        sources["region"] = Source("derived from default_zone")
    for name in (
        "project_id",
        "cluster_name",
        "default_zone",
        "region",
        "base_output_dir",
        "workload_image",
    ):
        values.setdefault(name, "")
    values.setdefault("reservations", ())
    return Config(**values, sources=sources)


EMPTY = Config(
    project_id="",
    cluster_name="",
    reservations=(),
    default_zone="",
    region="",
    base_output_dir="",
    workload_image="",
)
"""A configuration with nothing set, for offline planning before ``config init``."""
