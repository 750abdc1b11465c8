"""The ``Slice`` value type: one TPU slice, parsed once from text.

``Slice.parse("tpu7x-4x4x8")`` and ``Slice.parse("tpu7x-256")`` give the same slice:
128 chips, 256 JAX devices, 32 hosts. Everything downstream reads fields, never strings.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

from tpu_trainer.catalog.accelerators import (
    ACCELERATORS,
    Accelerator,
    Family,
    Precision,
    family_from_prefix,
    known_prefixes,
)
from tpu_trainer.errors import TopologyError

_NAME = re.compile(r"^(?P<prefix>[a-z0-9]+?)-(?P<rest>\d+(?:x\d+)*)$")
_MAX_SIDE = 256


def _fmt(dims: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in dims)


def _cubes(dims: tuple[int, ...]) -> int:
    return math.prod(d // 4 for d in dims)


def topology_is_valid(acc: Accelerator, dims: tuple[int, ...]) -> bool:
    """Whether ``dims`` is a topology ``acc`` offers."""
    rule = acc.topology
    if len(dims) != rule.dims:
        return False
    if _fmt(dims) in rule.listed:
        return True
    if rule.dims != 3 or rule.cube_max == 0:
        return False
    if any(d % 4 or not 4 <= d <= _MAX_SIDE for d in dims):
        return False
    if rule.nondecreasing and list(dims) != sorted(dims):
        return False
    return _cubes(dims) <= rule.cube_max


def valid_topologies(acc: Accelerator, *, limit_chips: int | None = None) -> list[str]:
    """Topologies ``acc`` offers, smallest first (optionally only up to ``limit_chips`` chips)."""
    ordered = list(_all_topologies(acc.family))
    if limit_chips is not None:
        ordered = [t for t in ordered if math.prod(_dims(t)) <= limit_chips]
    return ordered


@functools.cache
def _all_topologies(family: Family) -> tuple[str, ...]:
    acc = ACCELERATORS[family]
    found = set(acc.topology.listed)
    rule = acc.topology
    if rule.dims == 3 and rule.cube_max:
        cubes = range(1, _MAX_SIDE // 4 + 1)
        for a in cubes:
            for b in cubes:
                if a * b > rule.cube_max:
                    break
                for c in cubes:
                    if a * b * c > rule.cube_max:
                        break
                    dims = (4 * a, 4 * b, 4 * c)
                    if topology_is_valid(acc, dims):
                        found.add(_fmt(dims))
    return tuple(sorted(found, key=lambda t: (math.prod(_dims(t)), _dims(t))))


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("x"))


def _number_form_choice(acc: Accelerator, candidates: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The topology xpk means by a number form: its preferred one, else the first in order."""
    ordered = sorted(candidates)
    preferred = [c for c in ordered if _fmt(c) in acc.topology.number_form_defaults]
    return (preferred or ordered)[0]


@dataclass(frozen=True, slots=True)
class Slice:
    """One TPU slice of one family and topology."""

    accelerator: Accelerator
    topology: tuple[int, ...]
    alternatives: tuple[str, ...] = field(default=(), compare=False)
    """Other topologies a number-form name (``tpu7x-2048``) could have meant."""

    # ---- construction -------------------------------------------------
    @classmethod
    def of(cls, family: Family, topology: str) -> Slice:
        """The slice of ``family`` with ``topology`` ("4x4x8")."""
        acc = ACCELERATORS[family]
        try:
            dims = _dims(topology)
        except ValueError:
            raise _bad_topology(acc, topology) from None
        if not topology_is_valid(acc, dims):
            raise _bad_topology(acc, topology)
        return cls(acc, dims)

    @classmethod
    def parse(cls, text: str) -> Slice:
        """Parse an xpk device type: ``tpu7x-4x4x8`` (topology form) or ``tpu7x-256`` (number form).

        In the number form N counts TensorCores for tpu7x, v5p and v4 and chips for v6e and
        v5litepod, as xpk does.
        """
        m = _NAME.match(text.strip().lower())
        family = family_from_prefix(m.group("prefix")) if m else None
        if m is None or family is None:
            raise TopologyError(
                f"'{text}' is not a TPU device type",
                fix="write <prefix>-<topology> such as tpu7x-4x4x8 or v6e-4x4; "
                f"known prefixes: {', '.join(known_prefixes())}",
            )
        acc = ACCELERATORS[family]
        rest = m.group("rest")
        if "x" in rest:
            return cls.of(family, rest)
        return cls._from_number(acc, int(rest), text)

    @classmethod
    def _from_number(cls, acc: Accelerator, number: int, text: str) -> Slice:
        per_chip = acc.tensorcores_per_chip if acc.xpk_number_counts_tensorcores else 1
        unit = "TensorCores" if per_chip > 1 else "chips"
        chips, remainder = divmod(number, per_chip)
        candidates = (
            [_dims(t) for t in valid_topologies(acc) if math.prod(_dims(t)) == chips]
            if remainder == 0
            else []
        )
        if not candidates:
            near = [
                f"{acc.xpk_prefix}-{math.prod(_dims(t)) * per_chip} ({t})"
                for t in valid_topologies(acc, limit_chips=max(chips * 4, 16))
            ][:12]
            raise TopologyError(
                f"'{text}' is not a {acc.name} slice: in {acc.xpk_prefix}-N, N counts {unit}, "
                f"and no {acc.name} topology has {number / per_chip:g} chips",
                fix=f"use one of: {', '.join(near)}",
            )
        chosen = _number_form_choice(acc, candidates)
        others = tuple(_fmt(c) for c in candidates if c != chosen)
        return cls(acc, chosen, others)

    # ---- geometry -------------------------------------------------------
    @property
    def family(self) -> Family:
        return self.accelerator.family

    @property
    def topology_name(self) -> str:
        """ "4x4x8"."""
        return _fmt(self.topology)

    @property
    def chips(self) -> int:
        return math.prod(self.topology)

    @property
    def tensorcores(self) -> int:
        return self.chips * self.accelerator.tensorcores_per_chip

    @property
    def jax_devices(self) -> int:
        """Devices JAX sees on the whole slice (what MaxText's ici_* product must equal)."""
        return self.chips * self.accelerator.jax_devices_per_chip

    @property
    def chips_per_host(self) -> int:
        return 1 if self.chips == 1 else min(self.accelerator.chips_per_host, self.chips)

    @property
    def hosts(self) -> int:
        return self.chips // self.chips_per_host

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    # ---- names the tools use -------------------------------------------
    @property
    def xpk_number(self) -> int:
        """The N of ``<prefix>-N``."""
        acc = self.accelerator
        return self.chips * (acc.tensorcores_per_chip if acc.xpk_number_counts_tensorcores else 1)

    @property
    def device_type(self) -> str:
        """Topology form, unambiguous: ``tpu7x-4x4x8``."""
        return f"{self.accelerator.xpk_prefix}-{self.topology_name}"

    @property
    def device_type_number(self) -> str:
        """Number form: ``tpu7x-256`` (ambiguous for large tpu7x/v5p/v4 slices)."""
        return f"{self.accelerator.xpk_prefix}-{self.xpk_number}"

    @property
    def machine_type(self) -> str:
        acc = self.accelerator
        if self.chips == 1 and acc.machine_type_single_chip:
            return acc.machine_type_single_chip
        return acc.machine_type

    @property
    def workload_policy(self) -> str | None:
        """GCE workload policy xpk's pods select on, for multi-host TPU v7 pools."""
        if self.accelerator.multi_host_needs_workload_policy and self.multi_host:
            return f"{self.device_type_number}-{self.topology_name}-placement-policy"
        return None

    def kueue_flavor(self, num_slices: int = 1) -> str:
        """ResourceFlavor name xpk derives: ``1xtpu7x-256``."""
        return f"{num_slices}x{self.device_type_number}"

    def kueue_quota(self, num_slices: int = 1) -> int:
        """``google.com/tpu`` nominal quota: every chip of every slice."""
        return self.chips * num_slices

    def configmap_entry(self, num_slices: int = 1) -> tuple[str, str]:
        """Key and value of the ``<cluster>-resources-configmap`` entry: hosts of all slices."""
        return self.device_type_number, str(self.hosts * num_slices)

    @property
    def hbm_gb_per_chip(self) -> int:
        return self.accelerator.hbm_gb_per_chip

    def peak_tflops_per_chip(self, precision: Precision) -> float:
        return self.accelerator.peak_tflops_per_chip(precision)

    @property
    def tpu_vm_accelerator_type(self) -> str:
        """``--accelerator-type`` for a TPU VM (same naming as xpk's number form)."""
        return self.device_type_number

    def __str__(self) -> str:
        return self.device_type


def _bad_topology(acc: Accelerator, topology: str) -> TopologyError:
    shown = valid_topologies(acc)
    listed = ", ".join(shown[:24]) + (f", ... ({len(shown)} in all)" if len(shown) > 24 else "")
    return TopologyError(
        f"'{topology}' is not a {acc.name} topology",
        fix=f"valid {acc.xpk_prefix} topologies: {listed}",
    )
