"""How JAX and libtpu name each TPU family, loaded once from ``tpu_kinds.yaml``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    text,
)

TPU_KINDS_FILE = "tpu_kinds.yaml"
CHIP_CONFIGS = frozenset({"default", "megacore"})


@dataclass(frozen=True, slots=True)
class TpuKind:
    """How JAX and libtpu name one TPU family."""

    device_kind: str
    """JAX's ``device.device_kind``."""
    libtpu_prefix: str
    """Prefix of libtpu's topology names (``tpu7x:2x4x4``)."""
    chip_config: str
    """``megacore`` where one JAX device spans the chip's two TensorCores."""


def load_tpu_kinds(text_: str, name: str = TPU_KINDS_FILE) -> dict[Family, TpuKind]:
    """Parse and check a ``tpu_kinds:`` document (family → names)."""
    kinds = mapping(name, parse_mapping(text_, name), "tpu_kinds")
    out: dict[Family, TpuKind] = {}
    for family, raw in kinds.items():
        where = f"{name}: tpu_kinds.{family}"
        try:
            key = Family(family)
        except ValueError:
            raise DataFileError(f"{where}: not a TPU family") from None
        if key is Family.CPU or not isinstance(raw, dict):
            raise DataFileError(f"{where}: must be a TPU family's mapping of names")
        kind = TpuKind(
            text(where, raw, "device_kind"),
            text(where, raw, "libtpu_prefix"),
            text(where, raw, "chip_config"),
        )
        if kind.chip_config not in CHIP_CONFIGS:
            raise DataFileError(f"{where}: chip_config must be one of {sorted(CHIP_CONFIGS)}")
        out[key] = kind
    return out


@functools.cache
def tpu_kinds() -> Mapping[Family, TpuKind]:
    """The packaged table, read and checked on first use."""
    return load_tpu_kinds(read_packaged("tpu_trainer.catalog", TPU_KINDS_FILE))
