"""MaxText's AOT compile (``train_compile``): how it names the target of a TPU slice, and which
keys the compile sets or ignores, from ``data/compile_targets.yaml``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import (
    DataFileError,
    integer,
    mapping,
    parse_mapping,
    read_packaged,
    string_set,
    text,
)

COMPILE_TARGETS_FILE = "data/compile_targets.yaml"


@dataclass(frozen=True, slots=True)
class TargetNames:
    """How MaxText names one family's compile targets: ``<prefix>-N`` with N as xpk counts it,
    for xpk's default topology of N when N is at most ``named_up_to`` or in ``named_also``;
    any other topology goes through ``internal_compile`` as ``<platform>:<topology>``."""

    prefix: str
    platform: str
    named_up_to: int
    named_also: frozenset[int] = frozenset()


def _numbers(where: str, raw: Mapping[str, object]) -> frozenset[int]:
    value = raw.get("named_also")
    if not isinstance(value, list):
        raise DataFileError(f"{where}: named_also must be a list of chip counts")
    return frozenset(integer(where, {"named_also": v}, "named_also", minimum=1) for v in value)


@dataclass(frozen=True, slots=True)
class CompileTable:
    targets: Mapping[Family, TargetNames]
    set_by_the_check: frozenset[str]
    """Keys the check sets itself; the recipe's values are dropped."""
    not_compiled: frozenset[str]
    """Keys that do not change the compiled step (left out of the cache key)."""


def load_compile_targets(text_: str, name: str = COMPILE_TARGETS_FILE) -> CompileTable:
    """Parse and check the document (family → naming, and the two key sets)."""
    doc = parse_mapping(text_, name)
    targets = mapping(name, doc, "compile_targets")
    out: dict[Family, TargetNames] = {}
    for family, raw in targets.items():
        where = f"{name}: compile_targets.{family}"
        if family not in {f.value for f in Family} or not isinstance(raw, dict):
            raise DataFileError(f"{where}: must be a TPU family's mapping of names")
        out[Family(family)] = TargetNames(
            text(where, raw, "prefix"),
            text(where, raw, "platform"),
            integer(where, raw, "named_up_to"),
            _numbers(where, raw),
        )
    return CompileTable(
        out, string_set(name, doc, "set_by_the_check"), string_set(name, doc, "not_compiled")
    )


@functools.cache
def compile_table() -> CompileTable:
    """The packaged table, read and checked on first use."""
    return load_compile_targets(read_packaged(__package__ or "", COMPILE_TARGETS_FILE))
