"""Cloud TPU hardware facts, one row per TPU family, loaded once from ``accelerators.yaml``.

Numbers are per chip unless a name says otherwise. The table is read and checked when this
module is imported: :data:`ACCELERATORS` and the prefix aliases are plain values from then on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum

from tpu_trainer.catalog.data_file import (
    DataFileError,
    flag,
    integer,
    mapping,
    number,
    only_keys,
    optional_number,
    optional_text,
    parse_mapping,
    read_packaged,
    string_set,
    strings,
    text,
)

ACCELERATORS_FILE = "accelerators.yaml"


class Family(StrEnum):
    """TPU generations the tool plans for."""

    V4 = "v4"
    V5E = "v5e"
    V5P = "v5p"
    V6E = "v6e"
    V7 = "v7"
    CPU = "cpu"
    """This machine's CPU, for local runs (one JAX device, no peak figure)."""


class Precision(StrEnum):
    """Training number formats that have their own peak throughput."""

    BF16 = "bf16"
    FP8 = "fp8"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyRule:
    """Which topologies a family accepts (mirrors how xpk enumerates them)."""

    dims: int
    """2 for the 2D-torus families (v5e, v6e), 3 for the 3D ones."""
    listed: tuple[str, ...]
    """Topologies accepted as they are (small slices, and every 2D one)."""
    cube_max: int = 0
    """3D families: AxBxC with each side a multiple of 4 (4..256) and at most this many 4x4x4 cubes."""
    nondecreasing: bool = True
    """3D families: sides must satisfy A <= B <= C (v4 accepts any order)."""
    number_form_defaults: frozenset[str] = frozenset()
    """Where several topologies share a chip count, the one xpk means by the number form
    (``tpu7x-512`` is 4x8x8, not 4x4x16); otherwise xpk takes the first in (A, B, C) order."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Accelerator:
    """Facts about one TPU family (one instance per family: compared and hashed by identity)."""

    family: Family
    name: str
    """Marketing name, for reports: "TPU v7 (Ironwood)"."""
    xpk_prefix: str
    """Prefix of xpk's device types: ``tpu7x``, ``v5litepod``..."""
    xpk_number_counts_tensorcores: bool
    """True when the N of ``<prefix>-N`` counts TensorCores, False when it counts chips."""
    tensorcores_per_chip: int
    jax_devices_per_chip: int
    """JAX devices per chip: 2 on TPU v7, 1 elsewhere (v4/v5p are megacore)."""
    chips_per_host: int
    hbm_gb_per_chip: int
    usable_hbm_gib_per_device: float | None
    """XLA's usable HBM per JAX device, when it has been measured."""
    peak_tflops: dict[Precision, float]
    """Peak dense TFLOP/s per chip, by precision (fp8 means fp8 or int8, as the hardware offers)."""
    gke_accelerator: str
    """Value of the ``cloud.google.com/gke-tpu-accelerator`` node label."""
    machine_type: str
    """GKE/GCE machine type of a 4-chip host."""
    machine_type_single_chip: str | None
    """Machine type of a 1-chip slice, where the family has one."""
    other_machine_types: tuple[str, ...]
    """Other machine types of a 4-chip host (tpu7x-ultranet-4t has RDMA NICs)."""
    multi_host_needs_workload_policy: bool
    """Multi-host node pools need a GCE workload policy (TPU v7)."""
    tpu_vm_runtime: str | None
    """``--version`` for ``gcloud compute tpus tpu-vm create``; None where the Cloud TPU API
    does not offer the family as a TPU VM (TPU v7 is offered through GKE and Compute Engine)."""
    topology: TopologyRule

    def peak_tflops_per_chip(self, precision: Precision) -> float:
        """Peak TFLOP/s per chip for ``precision`` (bf16 when the family has no fp8 figure;
        0 where there is no peak figure at all, as on a CPU)."""
        return self.peak_tflops.get(precision, self.peak_tflops.get(Precision.BF16, 0.0))


_TOPOLOGY_KEYS = frozenset(
    {"dims", "listed", "cube_max", "nondecreasing", "number_form_defaults", "number_form_except"}
)
_ACCELERATOR_KEYS = frozenset(f.name for f in fields(Accelerator)) - {"family"}


@dataclass(frozen=True, slots=True)
class AcceleratorTable:
    """What ``accelerators.yaml`` holds, checked."""

    accelerators: dict[Family, Accelerator]
    """Every family, in the file's order."""
    prefix_aliases: dict[str, Family]
    """Lower-case xpk prefixes and common names → family."""


def _family(where: str, value: object) -> Family:
    try:
        return Family(str(value))
    except ValueError:
        known = ", ".join(f.value for f in Family)
        raise DataFileError(f"{where}: {value!r} is not a family (known: {known})") from None


def _entry(where: str, raw: object, allowed: frozenset[str]) -> Mapping[str, object]:
    if not isinstance(raw, dict):
        raise DataFileError(f"{where}: must be a mapping of {', '.join(sorted(allowed))}")
    only_keys(where, raw, allowed)
    return raw


def _topology(where: str, raw: object, sets: Mapping[str, frozenset[str]]) -> TopologyRule:
    row = _entry(where, raw, _TOPOLOGY_KEYS)
    defaults: frozenset[str] = frozenset()
    if "number_form_defaults" in row:
        named = text(where, row, "number_form_defaults")
        if named not in sets:
            raise DataFileError(
                f"{where}: number_form_defaults {named!r} is not a number_form_sets entry"
            )
        lacking = (
            string_set(where, row, "number_form_except")
            if "number_form_except" in row
            else frozenset()
        )
        if lacking - sets[named]:
            raise DataFileError(
                f"{where}: number_form_except lists {', '.join(sorted(lacking - sets[named]))}, "
                f"not in {named}"
            )
        defaults = sets[named] - lacking
    elif "number_form_except" in row:
        raise DataFileError(f"{where}: number_form_except needs number_form_defaults")
    return TopologyRule(
        dims=integer(where, row, "dims", minimum=1),
        listed=strings(where, row, "listed"),
        cube_max=integer(where, row, "cube_max") if "cube_max" in row else 0,
        nondecreasing=flag(where, row, "nondecreasing", default=True),
        number_form_defaults=defaults,
    )


def _peak_tflops(where: str, raw: Mapping[str, object]) -> dict[Precision, float]:
    peaks = mapping(where, raw, "peak_tflops")
    out: dict[Precision, float] = {}
    for key in peaks:
        try:
            precision = Precision(key)
        except ValueError:
            known = ", ".join(p.value for p in Precision)
            raise DataFileError(f"{where}: peak_tflops.{key}: not a precision ({known})") from None
        out[precision] = number(f"{where}: peak_tflops", peaks, key)
    return out


def _accelerator(
    where: str, family: Family, raw: object, sets: Mapping[str, frozenset[str]]
) -> Accelerator:
    row = _entry(where, raw, _ACCELERATOR_KEYS)
    return Accelerator(
        family=family,
        name=text(where, row, "name"),
        xpk_prefix=text(where, row, "xpk_prefix"),
        xpk_number_counts_tensorcores=flag(where, row, "xpk_number_counts_tensorcores"),
        tensorcores_per_chip=integer(where, row, "tensorcores_per_chip", minimum=1),
        jax_devices_per_chip=integer(where, row, "jax_devices_per_chip", minimum=1),
        chips_per_host=integer(where, row, "chips_per_host", minimum=1),
        hbm_gb_per_chip=integer(where, row, "hbm_gb_per_chip"),
        usable_hbm_gib_per_device=optional_number(where, row, "usable_hbm_gib_per_device"),
        peak_tflops=_peak_tflops(where, row),
        gke_accelerator=text(where, row, "gke_accelerator", empty=True),
        machine_type=text(where, row, "machine_type", empty=True),
        machine_type_single_chip=optional_text(where, row, "machine_type_single_chip"),
        other_machine_types=strings(where, row, "other_machine_types"),
        multi_host_needs_workload_policy=flag(where, row, "multi_host_needs_workload_policy"),
        tpu_vm_runtime=optional_text(where, row, "tpu_vm_runtime"),
        topology=_topology(f"{where}.topology", row.get("topology"), sets),
    )


def load_accelerators(text_: str, name: str = ACCELERATORS_FILE) -> AcceleratorTable:
    """Parse and check an accelerators document: every family once, every alias a family."""
    doc = parse_mapping(text_, name)
    only_keys(name, doc, frozenset({"number_form_sets", "accelerators", "prefix_aliases"}))
    raw_sets = mapping(name, doc, "number_form_sets")
    sets = {k: string_set(f"{name}: number_form_sets", raw_sets, k) for k in raw_sets}
    accelerators: dict[Family, Accelerator] = {}
    for key, raw in mapping(name, doc, "accelerators").items():
        where = f"{name}: accelerators.{key}"
        family = _family(where, key)
        accelerators[family] = _accelerator(where, family, raw, sets)
    missing = [f.value for f in Family if f not in accelerators]
    if missing:
        raise DataFileError(f"{name}: accelerators: {', '.join(missing)} missing")
    aliases: dict[str, Family] = {}
    for alias, value in mapping(name, doc, "prefix_aliases").items():
        where = f"{name}: prefix_aliases.{alias}"
        if alias != alias.lower():
            raise DataFileError(f"{where}: must be lower case (prefixes are matched so)")
        aliases[alias] = _family(where, value)
    for acc in accelerators.values():
        if aliases.get(acc.xpk_prefix) is not acc.family:
            raise DataFileError(
                f"{name}: prefix_aliases.{acc.xpk_prefix} must name {acc.family.value} "
                "(every xpk_prefix is an alias of its own family)"
            )
    return AcceleratorTable(accelerators, aliases)


_TABLE = load_accelerators(read_packaged(__package__ or "", ACCELERATORS_FILE))

ACCELERATORS: dict[Family, Accelerator] = _TABLE.accelerators
"""Every family's facts, CPU included."""

_PREFIX_ALIASES: Mapping[str, Family] = _TABLE.prefix_aliases


def family_from_prefix(prefix: str) -> Family | None:
    """The family an xpk prefix or a common alias names, or None."""
    return _PREFIX_ALIASES.get(prefix.lower())


def known_prefixes() -> tuple[str, ...]:
    """Every prefix :func:`family_from_prefix` accepts."""
    return tuple(_PREFIX_ALIASES)
