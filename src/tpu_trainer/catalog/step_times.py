"""Published training step times and the default run overheads, loaded once from
``step_times.yaml`` (each table with its public source and date)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import (
    DataFileError,
    integer,
    mapping,
    number,
    only_keys,
    parse_mapping,
    read_packaged,
    text,
)

STEP_TIMES_FILE = "step_times.yaml"
OVERHEADS = ("provisioning", "scheduling", "compile", "teardown")
_ROW_KEYS = frozenset({"model", "chips", "seq", "precision", "step_seconds"})


@dataclass(frozen=True, slots=True)
class PublishedStep:
    model: str
    family: Family
    chips: int
    seq: int
    precision: str
    step_seconds: float
    source: str
    date: str


@dataclass(frozen=True, slots=True)
class StepTimes:
    rows: tuple[PublishedStep, ...]
    default_overheads: Mapping[str, float]


def _row(where: str, raw: object, family: Family, source: str, date: str) -> PublishedStep:
    if not isinstance(raw, dict):
        raise DataFileError(f"{where} must be a mapping")
    only_keys(where, raw, _ROW_KEYS)
    precision = text(where, raw, "precision")
    if precision not in ("bf16", "fp8"):
        raise DataFileError(f"{where}: precision must be bf16 or fp8")
    seconds = number(where, raw, "step_seconds")
    if seconds <= 0:
        raise DataFileError(f"{where}: step_seconds must be > 0")
    return PublishedStep(
        text(where, raw, "model"),
        family,
        integer(where, raw, "chips", minimum=1),
        integer(where, raw, "seq", minimum=1),
        precision,
        seconds,
        source,
        date,
    )


def load_step_times(document: str, where: str = STEP_TIMES_FILE) -> StepTimes:
    """Parse and check the document: every row complete, every table sourced, every overhead
    given in seconds."""
    doc = parse_mapping(document, where)
    tables = doc.get("tables")
    if not isinstance(tables, list):
        raise DataFileError(f"{where}: tables must be a list")
    rows: list[PublishedStep] = []
    for i, table in enumerate(tables):
        at = f"{where}: tables[{i}]"
        if not isinstance(table, dict):
            raise DataFileError(f"{at} must be a mapping")
        only_keys(at, table, frozenset({"source", "date", "family", "rows"}))
        source, date = text(at, table, "source"), text(at, table, "date")
        try:
            family = Family(text(at, table, "family"))
        except ValueError:
            raise DataFileError(f"{at}: family is not a TPU family") from None
        if not isinstance(table.get("rows"), list):
            raise DataFileError(f"{at}: rows must be a list")
        rows += [
            _row(f"{at}.rows[{j}]", row, family, source, date)
            for j, row in enumerate(table["rows"])
        ]
    raw = mapping(where, doc, "default_overheads")
    only_keys(f"{where}: default_overheads", raw, frozenset(OVERHEADS))
    overheads = {name: number(f"{where}: default_overheads", raw, name) for name in OVERHEADS}
    return StepTimes(tuple(rows), overheads)


STEP_TIMES = load_step_times(read_packaged(__package__ or "", STEP_TIMES_FILE))
"""The shipped table."""
