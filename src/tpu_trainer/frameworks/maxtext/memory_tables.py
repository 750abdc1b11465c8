"""The memory estimate's constants for MaxText 0.2.5, loaded once from
``data/memory_estimate.yaml``: dtype widths, what each remat policy keeps in HBM, the host
offload's measured saving and the calibration cases (real AOT compiles)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.data_file import (
    DataFileError,
    integer,
    mapping,
    number,
    parse_mapping,
    read_packaged,
    string_set,
    strings,
    text,
)

MEMORY_ESTIMATE_FILE = "data/memory_estimate.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationPoint:
    """One real AOT compile the estimate was compared with."""

    label: str
    args: tuple[str, ...]
    device_type: str
    params: int
    """Parameters of the model (the estimate's count)."""
    aot_bytes: int
    """Bytes per device from the compile (argument + output − alias + temp, or the OOM's
    required figure)."""
    ratio: float
    """Raw estimate ÷ ``aot_bytes`` when it was recorded."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTables:
    dtype_bytes: Mapping[str, int]
    optimizer_offload_saving: float
    saved_on_device: Mapping[str, frozenset[str]]
    calibration: tuple[CalibrationPoint, ...]


def _point(name: str, index: int, raw: object) -> CalibrationPoint:
    where = f"{name}: calibration[{index}]"
    if not isinstance(raw, dict):
        raise DataFileError(f"{where}: must be a mapping")
    return CalibrationPoint(
        label=text(where, raw, "label"),
        args=strings(where, raw, "args"),
        device_type=text(where, raw, "device_type"),
        params=integer(where, raw, "params", minimum=1),
        aot_bytes=integer(where, raw, "aot_bytes", minimum=1),
        ratio=number(where, raw, "ratio"),
    )


def load_memory_tables(text_: str, name: str = MEMORY_ESTIMATE_FILE) -> MemoryTables:
    """Parse and check the document (every key present, of the right kind)."""
    doc = parse_mapping(text_, name)
    widths = mapping(name, doc, "dtype_bytes")
    dtype_bytes = {k: integer(f"{name}: dtype_bytes", widths, k, minimum=1) for k in widths}
    saved = mapping(name, doc, "saved_on_device")
    saving = number(name, doc, "optimizer_offload_saving")
    if not 0 <= saving < 1:
        raise DataFileError(f"{name}: optimizer_offload_saving must be a share in [0, 1)")
    points = doc.get("calibration")
    if not isinstance(points, list) or not points:
        raise DataFileError(f"{name}: calibration must be a non-empty list of compiles")
    return MemoryTables(
        dtype_bytes=dtype_bytes,
        optimizer_offload_saving=saving,
        saved_on_device={k: string_set(f"{name}: saved_on_device", saved, k) for k in saved},
        calibration=tuple(_point(name, i, raw) for i, raw in enumerate(points)),
    )


@functools.cache
def memory_tables() -> MemoryTables:
    """The packaged tables, read and checked on first use."""
    return load_memory_tables(read_packaged(__package__ or "", MEMORY_ESTIMATE_FILE))
