"""Whether JAX's ``create_device_mesh`` can lay a logical mesh onto a slice's physical mesh.

JAX must find, for each logical axis from the last to the first, a subset of the slice's
physical axes whose sizes multiply to it. This module predicts that assignment (and JAX's
per-device-kind shortcuts) without JAX, and proposes ``ici_*`` settings that map;
``mesh_runtime`` asks JAX itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.tpu_kinds import tpu_kinds
from tpu_trainer.frameworks.maxtext.mesh_axes import MeshAxisName, setting_key
from tpu_trainer.plan.slices import Slice

SINK = MeshAxisName.FSDP
"""The axis proposals move factors into (MaxText's recommended auto-filled ICI axis)."""
XYZC = ("x", "y", "z", "core")
"""Names of the physical axes (the core axis only on TPU v7)."""


@dataclass(frozen=True, slots=True)
class PhysicalMesh:
    """A slice's devices as JAX arranges them: (x, y, z), plus a core axis on TPU v7."""

    shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    core_first: bool
    """TPU v7: JAX tries subsets holding the (faster) core axis first."""

    def __str__(self) -> str:
        return f"{list(self.shape)} ({', '.join(self.axis_names)})"


def physical_mesh(slice_: Slice) -> PhysicalMesh | None:
    """The physical mesh of one slice; None off TPU (JAX reshapes the device list as it is)."""
    if slice_.family not in tpu_kinds():
        return None
    dims = tuple(slice_.topology) + (1,) * (3 - len(slice_.topology))
    if slice_.accelerator.jax_devices_per_chip > 1:
        return PhysicalMesh((*dims, slice_.accelerator.jax_devices_per_chip), XYZC, True)
    return PhysicalMesh(dims, XYZC[:3], False)


def reorders_without_search(slice_: Slice, logical: Sequence[int]) -> str:
    """Why JAX's per-device-kind shortcut builds this mesh with no axis matching ('' if not).

    Small slices get a fixed ring order reshaped to any shape: TPU v7 up to 32 devices with
    x, y ≤ 2; v5e/v6e 2x2, any 8 chips, and 4x4 when one axis spans all 16; v5p 2x2x2.
    """
    n, dims, family = slice_.jax_devices, slice_.topology, slice_.family
    if family is Family.V7 and n % 8 == 0 and n <= 32 and dims[0] <= 2 and dims[1] <= 2:
        return f"{n} TPU v7 devices with x, y ≤ 2"
    if family in (Family.V5E, Family.V6E):
        if dims == (2, 2) or n == 8:
            return f"{n} chips on one tray"
        if dims == (4, 4) and max(logical, default=0) == 16:
            return "a 4x4 slice with one axis of 16"
    if family is Family.V5P and dims == (2, 2, 2):
        return "a v5p 2x2x2 slice"
    return ""


# ---- the assignment rule of create_device_mesh ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Assignment:
    """The outcome of matching a logical mesh to physical axes."""

    physical: tuple[int, ...]
    logical: tuple[int, ...]
    axes: tuple[tuple[int, ...], ...]
    """Physical axis indices each logical axis took (empty where none matched a size-1 axis)."""
    failed_index: int | None = None
    remaining: tuple[int, ...] = ()
    """Physical sizes still free when the assignment failed (taken axes are 0)."""

    @property
    def ok(self) -> bool:
        return self.failed_index is None

    @property
    def error(self) -> str:
        """JAX's NotImplementedError text for a failed assignment ('' when it worked)."""
        if self.failed_index is None:
            return ""
        return jax_assignment_error(
            self.failed_index, self.logical[self.failed_index], self.remaining
        )


def jax_assignment_error(index: int, size: int, remaining: Sequence[int]) -> str:
    """The message of JAX's NotImplementedError, word for word (JAX 0.12)."""
    return (
        f"Failed to find assignment for logical_axis_index {index} of size {size} with "
        f"remaining assignable mesh {list(remaining)}. The size of each axis in your logical "
        "mesh must be equal to the product of some subset of the physical mesh axis sizes. "
        "E.g. logical mesh (4, 16) is compatible with physical mesh 4x4x4 since 4=4 and "
        "16=4x4. If you want to split physical axes, set  allow_split_physical_axes to True."
    )


def _core_rank(axis: int) -> int:
    """TPU v7 preference: the core axis (3) first, then x, y, z."""
    return 0 if axis == 3 else axis + 1


def _subsets(count: int, size: int, core_first: bool) -> Iterator[tuple[int, ...]]:
    """Subsets of ``size`` physical axes in the order JAX tries them."""
    subsets = list(itertools.combinations(range(count), size))
    if core_first and count == 4:
        subsets.sort(key=lambda s: (min(map(_core_rank, s)), sum(map(_core_rank, s))))
    return iter(subsets)


def _take(remaining: Sequence[int], size: int, core_first: bool) -> tuple[int, ...] | None:
    for width in range(len(remaining), 0, -1):
        for subset in _subsets(len(remaining), width, core_first):
            if math.prod(remaining[i] for i in subset) == size:
                return subset
    return None


def assign(physical: Sequence[int], logical: Sequence[int], *, core_first: bool) -> Assignment:
    """Match logical axes (last = most network-intensive, matched first) to physical axes:
    each takes the widest subset of still-free physical axes whose sizes multiply to it."""
    remaining = list(physical)
    taken: list[tuple[int, ...]] = [() for _ in logical]
    for index in reversed(range(len(logical))):
        subset = _take(remaining, logical[index], core_first)
        if subset is None:
            if logical[index] > 1:
                return Assignment(
                    tuple(physical), tuple(logical), tuple(taken), index, tuple(remaining)
                )
            continue
        taken[index] = subset
        remaining = [0 if i in subset else v for i, v in enumerate(remaining)]
    return Assignment(tuple(physical), tuple(logical), tuple(taken))


@dataclass(frozen=True, slots=True)
class MeshTarget:
    """Where a logical mesh must land: one slice's devices, maybe in JAX's shortcut order."""

    slice: Slice
    physical: PhysicalMesh | None
    allow_split: bool = False

    def maps(self, logical: Sequence[int]) -> Assignment | None:
        """The assignment, or None when no matching is needed (CPU, shortcut, split allowed)."""
        if self.physical is None or self.allow_split:
            return None
        if reorders_without_search(self.slice, logical):
            return None
        return assign(self.physical.shape, logical, core_first=self.physical.core_first)

    def accepts(self, logical: Sequence[int]) -> bool:
        found = self.maps(logical)
        return found is None or found.ok


def mesh_target(slice_: Slice, effective: Mapping[str, Any]) -> MeshTarget:
    return MeshTarget(
        slice_, physical_mesh(slice_), effective.get("allow_split_physical_axes") is True
    )


# ---- proposals ------------------------------------------------------------------------------


def _factorizations(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    if parts == 1:
        yield (total,)
        return
    for first in range(1, total + 1):
        if total % first == 0:
            for rest in _factorizations(total // first, parts - 1):
                yield (first, *rest)


def propose_ici(
    names: Sequence[str],
    wanted: Mapping[str, int],
    target: MeshTarget,
    *,
    failing: str | None = None,
    limit: int = 3,
) -> list[dict[str, int]]:
    """Up to ``limit`` ``ici_*`` settings over the user's axes (and fsdp) that multiply to the
    slice's devices and map onto it, closest first; moving the failing axis' factor into fsdp
    ranks first. ``wanted`` maps ``ici_*`` keys to the user's values (-1 = no preference)."""
    keys = [k for k, v in wanted.items() if v != 1]
    sink = setting_key(SINK, "ici")
    if sink and SINK in names and sink not in keys:
        keys.append(sink)
    keys = keys[:6]
    if not keys:
        return []
    ranked: list[tuple[tuple[float, ...], dict[str, int]]] = []
    for values in _factorizations(target.slice.jax_devices, len(keys)):
        choice = dict(zip(keys, values, strict=True))
        shape = [choice.get(setting_key(n, "ici") or "", 1) for n in names]
        if math.prod(shape) != target.slice.jax_devices or not target.accepts(shape):
            continue
        ranked.append((_score(choice, wanted, failing, sink), choice))
    ranked.sort(key=lambda pair: pair[0])
    return [choice for _, choice in ranked[:limit]]


def _score(
    choice: Mapping[str, int], wanted: Mapping[str, int], failing: str | None, sink: str | None
) -> tuple[float, ...]:
    """Lower is better: the failing axis' factor moved into fsdp, then fewest other settings
    changed, then the smallest change (in powers of two), then the larger fsdp."""
    given = {k: v for k, v in wanted.items() if v > 0}
    changed = [k for k, v in choice.items() if k in given and v != given[k]]
    into_sink = bool(
        failing
        and failing != sink
        and failing in choice
        and set(changed) <= {failing, sink}
        and choice[failing] < given.get(failing, 1)
    )
    distance = sum(abs(math.log2(choice[k] / given[k])) for k in changed)
    others = len([k for k in changed if k != sink])
    sink_size = -float(choice.get(sink or "", 1))
    return (1.0 - into_sink, float(others), distance, sink_size, *map(float, choice.values()))


def as_words(choice: Mapping[str, int]) -> str:
    """``ici_fsdp_parallelism=16 ici_tensor_parallelism=4`` (ready to paste)."""
    return " ".join(f"{k}={v}" for k, v in choice.items())
