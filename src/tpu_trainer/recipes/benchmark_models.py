"""MaxText's benchmark-runner models, per MaxText revision, from the shipped data file.

Trillium (v6e) and v5p recipes name a model of MaxText's ``benchmarks/`` (not part of its
wheel): ``benchmark_models.yaml`` records, for each revision the recipes pin, every model the
runner finds by name and what the runner itself adds (its defaults and the pod command). It is
written by ``tools/build_benchmark_models.py``; this module only reads it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import cast

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    strings,
    text,
)
from tpu_trainer.errors import RecipeError

DATA_FILE = "benchmark_models.yaml"
_PACKAGE = "tpu_trainer.recipes.data"


@dataclass(frozen=True, slots=True)
class BenchmarkModel:
    name: str
    """The name the runner is given (``--model_name``)."""
    model_name: str
    """The configuration's own name (``llama3_1-8b-8192``)."""
    model_type: str
    """MaxText's ``model_name`` argument (``llama3.1-8b``)."""
    family: str
    """The configuration file it comes from: ``trillium`` or ``v5p``."""
    tuning_params: tuple[tuple[str, str], ...]
    """MaxText arguments in the configuration's order, values as the runner writes them."""
    xla_flags: str


@dataclass(frozen=True, slots=True)
class RunnerDefaults:
    num_slices: int
    num_steps: int
    priority: str
    max_restarts: int | None
    """None: the runner passes none, so xpk's default applies."""
    base_docker_image: str
    libtpu_version: str
    libtpu_type: str


@dataclass(frozen=True, slots=True)
class PodCommand:
    """The pod command the runner writes, with ``{placeholders}`` for per-run values."""

    env: tuple[tuple[str, str], ...]
    entry: tuple[str, ...]
    args: tuple[str, ...]
    libtpu_install: str


@dataclass(frozen=True, slots=True)
class Revision:
    key: str
    """As the recipes pin it: a tag (``tpu-recipes-v0.1.4``) or a full commit."""
    commit: str
    date: str
    """The commit's day (``YYYY-MM-DD``): which revision came first."""
    subcommand: str
    """``xpk`` when the runner takes a subcommand first, else empty."""
    options: frozenset[str]
    defaults: RunnerDefaults
    pod_command: PodCommand
    models: Mapping[str, BenchmarkModel]

    @property
    def short(self) -> str:
        return self.commit[:8] if self.key == self.commit else self.key


def _int(where: str, raw: Mapping[str, object], key: str, *, optional: bool = False) -> int | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise DataFileError(f"{where}: {key} must be an integer")
    return value


def _model(where: str, name: str, raw: Mapping[str, object]) -> BenchmarkModel:
    params = mapping(where, raw, "tuning_params")
    if not all(isinstance(v, str) for v in params.values()):
        raise DataFileError(f"{where}: tuning_params values must be strings")
    return BenchmarkModel(
        name=name,
        model_name=text(where, raw, "model_name"),
        model_type=text(where, raw, "model_type"),
        family=text(where, raw, "source"),
        tuning_params=tuple((k, cast(str, v)) for k, v in params.items()),
        xla_flags=text(where, raw, "xla_flags", empty=True),
    )


def _pairs(where: str, raw: Mapping[str, object], key: str) -> tuple[tuple[str, str], ...]:
    value = raw.get(key)
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        raise DataFileError(f"{where}: {key} must be a list of [name, value] pairs")
    return tuple((p[0], p[1]) for p in cast(list[list[str]], value))


def _revision(key: str, raw: Mapping[str, object]) -> Revision:
    where = f"{DATA_FILE}: revisions.{key}"
    runner = mapping(where, raw, "runner")
    defaults = mapping(where + ".runner", runner, "defaults")
    command = mapping(where + ".runner", runner, "pod_command")
    dwhere, cwhere = where + ".runner.defaults", where + ".runner.pod_command"
    models = mapping(where, raw, "models")
    return Revision(
        key=key,
        commit=text(where, raw, "commit"),
        date=text(where, raw, "date"),
        subcommand=text(where + ".runner", runner, "subcommand", empty=True),
        options=frozenset(strings(where + ".runner", runner, "options")),
        defaults=RunnerDefaults(
            num_slices=cast(int, _int(dwhere, defaults, "num_slices")),
            num_steps=cast(int, _int(dwhere, defaults, "num_steps")),
            priority=text(dwhere, defaults, "priority"),
            max_restarts=_int(dwhere, defaults, "max_restarts", optional=True),
            base_docker_image=text(dwhere, defaults, "base_docker_image"),
            libtpu_version=text(dwhere, defaults, "libtpu_version", empty=True),
            libtpu_type=text(dwhere, defaults, "libtpu_type"),
        ),
        pod_command=PodCommand(
            env=_pairs(cwhere, command, "env"),
            entry=strings(cwhere, command, "entry"),
            args=strings(cwhere, command, "args"),
            libtpu_install=text(cwhere, command, "libtpu_install", empty=True),
        ),
        models={
            name: _model(f"{where}.models.{name}", name, mapping(where + ".models", models, name))
            for name in models
        },
    )


def parse_revisions(document: str, name: str = DATA_FILE) -> dict[str, Revision]:
    raw = parse_mapping(document, name)
    revisions = mapping(name, raw, "revisions")
    return {key: _revision(key, mapping(name, revisions, key)) for key in revisions}


@cache
def revisions() -> dict[str, Revision]:
    """Every revision in the shipped data file (read once)."""
    return parse_revisions(read_packaged(_PACKAGE, DATA_FILE))


def find_revision(pin: str) -> Revision | None:
    """The revision a recipe pins: a tag, or a commit given by at least 7 of its hex digits."""
    known = revisions()
    if pin in known:
        return known[pin]
    lowered = pin.lower()
    if len(lowered) >= 7 and all(c in "0123456789abcdef" for c in lowered):
        return next((r for r in known.values() if r.commit.startswith(lowered)), None)
    return None


def known_revisions() -> str:
    return ", ".join(r.short for r in revisions().values())


def first_defining(name: str, since: Revision) -> Revision | None:
    """The earliest shipped revision, from ``since``'s day on, whose runner knows ``name``
    (the earliest of all when every one is older); None when none does."""
    defining = sorted((r for r in revisions().values() if name in r.models), key=lambda r: r.date)
    later = [r for r in defining if r.date >= since.date]
    found = later or defining
    return found[0] if found else None


def find_model(revision: Revision, name: str, source: str, subcommand: str = "") -> BenchmarkModel:
    """The model ``name`` at ``revision``; an unknown name lists the nearest ones, and the
    revisions that define it (saying when their runner wants another subcommand)."""
    model = revision.models.get(name)
    if model is not None:
        return model
    nearest = difflib.get_close_matches(name, list(revision.models), n=5, cutoff=0.5)
    defining = [r for r in revisions().values() if name in r.models]
    elsewhere = [r.short for r in defining]
    message = f"{source}: MaxText at {revision.short} has no benchmark model '{name}'"
    if nearest:
        message += "; the nearest names there: " + ", ".join(nearest)
    if elsewhere:
        fix = (
            f"'{name}' is defined at {', '.join(elsewhere)}: pin one of them in the recipe's "
            f"README (`git checkout <rev>`) or pass --var MAXTEXT_REVISION={elsewhere[-1]}"
        )
        wanted = {r.subcommand for r in defining} - {subcommand}
        if wanted:
            fix += (
                f"; the runner there takes `{sorted(wanted)[0]}` first "
                "(`python3 -m benchmarks.benchmark_runner xpk --model_name=...`)"
            )
    else:
        fix = "correct --model_name (MaxText's benchmarks/maxtext_*_model_configs.py at that revision)"
    raise RecipeError(message, fix=fix)
