"""The configuration: typed, validated once, each value remembering where it came from.

The file's schema is a pydantic model built from :data:`KEYS`; its first error is reported
as ``file:line: key: problem`` with a fix."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model
from pydantic_core import PydanticCustomError

from tpu_trainer.config.prices import PRICES_EXAMPLE, ChipPrice, PriceError, parse_prices
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
    submitter: str | None = None
    """Which variant of a recipe folder holding both to read: ``xpk`` (``xpk/run_recipe.sh``) or
    ``gcluster`` (``cluster_toolkit/run_recipe.sh``); unset: the one the folder has, xpk if both."""
    prices: Mapping[str, ChipPrice] = field(default_factory=dict)
    """Chip-hour price overrides by TPU family (``prices:``; see ``config/prices.py``)."""
    watchdog_k: float | None = None
    """A run hangs after no new step for this many steady step times (None: the default, 5)."""
    first_step_deadline: float | None = None
    """Seconds the first step may take (None: from this model's history, else 30 min)."""
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
    _Key(
        "submitter",
        False,
        "recipe variant to read where a folder has both (xpk or gcluster)",
        re.compile(r"^(?:xpk|gcluster)$"),
        "xpk",
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


def _problem(problem: str, fix: str) -> PydanticCustomError:
    """A value's problem as the schema reports it; :func:`_first_error` turns it into the
    ``file:line: key: problem`` message."""
    return PydanticCustomError("config_value", "{problem}", {"problem": problem, "fix": fix})


def _text(raw: Any, key: _Key) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _problem(
            f"expected text, got {type(raw).__name__}", f"write it as `{key.name}: {key.example}`"
        )
    value = str(raw).strip()
    if key.pattern is not None and not key.pattern.match(value):
        raise _problem(
            f"'{short(value)}' is not a valid {key.help}",
            f"write it like `{key.name}: {key.example}`",
        )
    return value


_RESERVATIONS_FIX = (
    "write `reservations:` as a list, highest priority first, e.g. "
    "`reservations: [res-a, {name: res-b, zone: us-central1-c}]`"
)
_RESERVATION_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z0-9]+$")


def _reservations(raw: Any) -> tuple[Reservation, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise _problem("needs at least one reservation", _RESERVATIONS_FIX)
    return tuple(_reservation(entry) for entry in raw)


def _reservation(entry: Any) -> Reservation:
    item = {"name": entry} if isinstance(entry, str) else entry
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise _problem(f"entry {short(repr(item))} has no name", _RESERVATIONS_FIX)
    unknown = set(item) - {"name", "zone", "project"}
    if unknown:
        raise _problem(f"unknown field(s) {short(str(sorted(unknown)))}", _RESERVATIONS_FIX)
    name = item["name"].strip()
    if not _RESERVATION_NAME.match(name):
        raise _problem(f"'{short(name)}' is not a reservation name", _RESERVATIONS_FIX)
    zone, project = item.get("zone"), item.get("project")
    if zone is not None and not _ZONE.match(str(zone)):
        raise _problem(
            f"zone '{short(str(zone))}' of {short(name)} is not a zone", _RESERVATIONS_FIX
        )
    return Reservation(name, str(zone) if zone else None, str(project) if project else None)


def _value(key: _Key) -> Callable[[Any], Any]:
    def check(raw: Any) -> Any:
        if key.name == "reservations":
            return _reservations(raw)
        if key.name == "tpu_recipes_path":
            return Path(_text(raw, key)).expanduser()
        return _text(raw, key)

    return check


def _prices(raw: Any) -> Mapping[str, ChipPrice]:
    try:
        return parse_prices(raw)
    except PriceError as e:
        raise _problem(str(e), f"write it like `{PRICES_EXAMPLE}` (USD per chip-hour)") from None


_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*(s|m|h)?$")
_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_WATCHDOG_KEYS = ("watchdog_k", "first_step_deadline")
"""Kept out of :data:`KEYS` (like ``prices``): numbers, not text for the plan's section."""


def _positive(name: str, example: str) -> Callable[[Any], float]:
    def check(raw: Any) -> float:
        text = str(raw).strip() if isinstance(raw, int | float | str) else ""
        found = _DURATION.match(text) if not isinstance(raw, bool) else None
        if found is None or (found[2] and name == "watchdog_k"):
            raise _problem(f"'{short(repr(raw))}' is not a positive number", f"write `{example}`")
        value = float(found[1]) * _SECONDS[found[2] or "s"]
        if value <= 0:
            raise _problem("must be more than 0", f"write `{example}`")
        return value

    return check


_FIELDS: dict[str, Any] = (
    {key.name: (Annotated[Any, BeforeValidator(_value(key))], None) for key in KEYS}
    | {"prices": (Annotated[Any, BeforeValidator(_prices)], None)}
    | {
        "watchdog_k": (
            Annotated[Any, BeforeValidator(_positive("watchdog_k", "watchdog_k: 5"))],
            None,
        ),
        "first_step_deadline": (
            Annotated[
                Any, BeforeValidator(_positive("first_step_deadline", "first_step_deadline: 45m"))
            ],
            None,
        ),
    }
)
_FileSchema: type[BaseModel] = create_model(
    "ConfigFile", __config__=ConfigDict(extra="forbid", frozen=True), **_FIELDS
)
"""The configuration file's schema: the known keys, each checked as :data:`KEYS` says."""


def _blank(raw: Any) -> bool:
    return raw is None or raw == ""


def _first_error(
    error: ValidationError | None,
    data: Mapping[str, Any],
    source: str,
    lines: Mapping[str, int],
    missing: list[_Key],
) -> ConfigError | None:
    """The one problem reported, as a reader of the file meets it: an unknown key first, then
    the keys in :data:`KEYS` order (a missing key or a bad value)."""
    details = error.errors() if error is not None else []
    for name in data:
        if any(d["type"] == "extra_forbidden" and d["loc"] == (name,) for d in details):
            close = difflib.get_close_matches(str(name), (*KEY_NAMES, *_WATCHDOG_KEYS), n=1)
            hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(KEY_NAMES)}"
            return _fail(source, short(str(name)), "unknown key", hint, lines.get(str(name)))
    bad = {str(d["loc"][0]): d for d in details if d["loc"]}
    for key in KEYS:
        if key in missing:
            fix = f"add `{key.name}: {key.example}` ({key.help}) to {source}"
            return _fail(source, key.name, "missing", fix)
        if key.name in bad:
            return _reported(bad[key.name], source, key.name, lines)
    for name in ("prices", *_WATCHDOG_KEYS):
        if name in bad:
            return _reported(bad[name], source, name, lines)
    return None


def _reported(found: Any, source: str, name: str, lines: Mapping[str, int]) -> ConfigError:
    ctx = found.get("ctx") or {}
    problem, fix = str(ctx.get("problem", found["msg"])), str(ctx.get("fix", ""))
    return _fail(source, name, problem, fix, lines.get(name))


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
    given = {k: v for k, v in data.items() if k not in KEY_NAMES or not _blank(v)}
    missing = [k for k in KEYS if k.required and require and _blank(data.get(k.name))]
    try:
        parsed, error = _FileSchema.model_validate(given), None
    except ValidationError as e:
        parsed, error = None, e
    problem = _first_error(error, data, source, lines, missing)
    if problem is not None or parsed is None:
        raise problem or ConfigError(f"{source}: not a configuration", fix="see `config init`")
    values: dict[str, Any] = {
        key.name: getattr(parsed, key.name) for key in KEYS if getattr(parsed, key.name) is not None
    }
    prices = getattr(parsed, "prices", None)
    if prices:
        values["prices"] = prices
    for name in _WATCHDOG_KEYS:
        if getattr(parsed, name, None) is not None:
            values[name] = getattr(parsed, name)
    sources = {name: Source(source, lines.get(name)) for name in values}
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
