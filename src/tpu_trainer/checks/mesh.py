"""The device mesh MaxText will build, checked before any TPU is asked for.

MaxText turns the ``ici_*``/``dcn_*`` parallelism settings into one logical mesh axis per entry
of ``mesh_axes`` (a single ``-1`` is filled with what the other axes leave), and JAX's
``create_device_mesh`` must then find, for each logical axis from the last to the first, a
subset of the slice's physical axes whose sizes multiply to it. This module predicts both steps
without JAX; ``mesh_runtime`` asks JAX itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

AXIS_SETTINGS: dict[str, str] = {
    "diloco": "diloco",
    "data": "data",
    "stage": "pipeline",
    "fsdp": "fsdp",
    "fsdp_transpose": "fsdp_transpose",
    "sequence": "sequence",
    "context": "context",
    "context_usp_ulysses": "context_usp_ulysses",
    "context_autoregressive": "context_autoregressive",
    "tensor": "tensor",
    "tensor_sequence": "tensor_sequence",
    "model": "tensor",
    "expert": "expert",
    "autoregressive": "autoregressive",
}
"""Mesh axis → the stem of its ``ici_<stem>_parallelism``/``dcn_<stem>_parallelism`` settings
(MaxText 0.2.5's table). Axes not listed (``attn_dp``, ``dcp``, ...) are always 1."""

SINK = "fsdp"
"""The axis proposals move factors into (MaxText's recommended auto-filled ICI axis)."""


class MeshError(TpuTrainerError):
    """Parallelism settings MaxText cannot turn into a mesh."""

    def __init__(self, message: str, *, fix: str = "", network: str = "") -> None:
        super().__init__(message, fix=fix)
        self.network = network
        """``ICI`` or ``DCN`` when the products are wrong; '' for a malformed setting."""


def setting_key(axis: str, network: str) -> str | None:
    """``ici_fsdp_parallelism`` for (``fsdp``, ``ici``); None for axes without a setting."""
    stem = AXIS_SETTINGS.get(axis)
    return f"{network}_{stem}_parallelism" if stem else None


@dataclass(frozen=True, slots=True)
class MeshAxis:
    """One logical mesh axis with its resolved sizes."""

    name: str
    ici: int
    """Size within a slice."""
    dcn: int
    """Size across slices (1 on one slice: MaxText ignores the dcn_* settings then)."""
    ici_key: str | None
    """``ici_*_parallelism`` setting of the axis (None for axes that are always 1)."""
    dcn_key: str | None


@dataclass(frozen=True, slots=True)
class ResolvedMesh:
    """The logical mesh MaxText builds, in ``mesh_axes`` order."""

    axes: tuple[MeshAxis, ...]
    devices_per_slice: int
    num_slices: int
    filled: tuple[str, ...] = ()
    """``-1`` settings and what they became (``ici_fsdp_parallelism=-1 → 16``)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def ici_shape(self) -> tuple[int, ...]:
        return tuple(a.ici for a in self.axes)

    @property
    def dcn_shape(self) -> tuple[int, ...]:
        return tuple(a.dcn for a in self.axes)

    @property
    def sizes(self) -> dict[str, int]:
        """Each mesh axis' total size (ICI × DCN; DCN only counts with several slices)."""
        multi = self.num_slices > 1
        return {a.name: a.ici * (a.dcn if multi else 1) for a in self.axes}


def _int_setting(effective: Mapping[str, Any], key: str) -> int:
    value = effective.get(key, 1)
    if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
        raise MeshError(
            f"{key}={value!r} is not a parallelism: MaxText wants a positive integer or -1",
            fix=f"set {key} to a positive integer, or -1 to let MaxText fill it",
        )
    return value


def mesh_axes(effective: Mapping[str, Any]) -> tuple[str, ...]:
    """The logical mesh axes, least network-intensive first."""
    axes = effective.get("mesh_axes") or ()
    return tuple(str(a) for a in axes)


def fill_unspecified(
    values: Sequence[int], target: int, network: str, names: Sequence[str] = ()
) -> tuple[int, ...]:
    """MaxText's ``-1`` rule: at most one ``-1``, filled with ``target`` ÷ the others' product,
    which must be whole; then the product must equal ``target``."""
    out = list(values)
    what = "slices" if network == "DCN" else "devices per slice"
    if out.count(-1) > 1:
        raise MeshError(
            f"more than one {network} axis is -1: MaxText fills at most one",
            fix="give every axis but one (usually fsdp for ICI, data for DCN) an explicit value",
            network=network,
        )
    if -1 in out:
        others = math.prod(v for v in out if v != -1)
        if others > target or target % others:
            raise MeshError(
                f"the {network} axis set to -1 cannot be filled: {target} {what} ÷ "
                f"{others} (the other axes' product) is not a whole number ≥ 1",
                fix=f"make the other {network} axes multiply to a divisor of {target}",
                network=network,
            )
        out[out.index(-1)] = target // others
    if math.prod(out) != target:
        terms = " × ".join(f"{n}({v})" for n, v in zip(names, out, strict=False) if v > 1)
        raise MeshError(
            f"Number of {what} {target} does not match the product of the {network} "
            f"parallelism {math.prod(out)}" + (f" ({terms})" if terms else ""),
            fix=f"make the {network.lower()}_* values multiply to {target}",
            network=network,
        )
    return tuple(out)


def raw_settings(effective: Mapping[str, Any], network: str) -> dict[str, int]:
    """``<network>_*`` key → value as given (``-1`` kept), for the axes of ``mesh_axes``."""
    out: dict[str, int] = {}
    for axis in mesh_axes(effective):
        key = setting_key(axis, network)
        if key:
            out[key] = _int_setting(effective, key)
    return out


def resolve_mesh(
    effective: Mapping[str, Any], devices_per_slice: int, num_slices: int
) -> ResolvedMesh:
    """The mesh MaxText builds from ``effective`` (raises :class:`MeshError` as MaxText would)."""
    names = mesh_axes(effective)
    if not names:
        raise MeshError("mesh_axes is empty", fix="keep base.yml's mesh_axes")
    ici_raw = raw_settings(effective, "ici")
    dcn_raw = raw_settings(effective, "dcn")
    ici_keys = [setting_key(a, "ici") for a in names]
    dcn_keys = [setting_key(a, "dcn") for a in names]
    ici_given = [ici_raw[k] if k else 1 for k in ici_keys]
    ici = fill_unspecified(ici_given, devices_per_slice, "ICI", names)
    dcn = tuple(dcn_raw[k] if k else 1 for k in dcn_keys)
    if num_slices > 1:
        dcn = fill_unspecified(dcn, num_slices, "DCN", names)
    filled = tuple(
        f"{k}=-1 → {v}" for k, v in zip(ici_keys, ici, strict=True) if k and ici_raw[k] == -1
    )
    if num_slices > 1:
        filled += tuple(
            f"{k}=-1 → {v}" for k, v in zip(dcn_keys, dcn, strict=True) if k and dcn_raw[k] == -1
        )
    axes = tuple(
        MeshAxis(n, i, d if num_slices > 1 else 1, ik, dk)
        for n, i, d, ik, dk in zip(names, ici, dcn, ici_keys, dcn_keys, strict=True)
    )
    return ResolvedMesh(axes, devices_per_slice, num_slices, filled)


CUSTOM_KEYS = ("mesh_axes", "logical_axis_rules", "data_sharding")


def custom_mesh_file(configs: MaxTextConfigs, effective: Mapping[str, Any]) -> dict[str, Any]:
    """The ``custom_mesh_and_rule`` file's settings ({} when none is named)."""
    name = str(effective.get("custom_mesh_and_rule") or "")
    if not name:
        return {}
    folder = configs.root / "custom_mesh_and_rule"
    path = folder / f"{name}.yml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yml")))
        raise MeshError(
            f"custom_mesh_and_rule={name}: MaxText has no such mesh and rule file",
            fix=f"use one of: {known}" if known else "drop custom_mesh_and_rule",
        )
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return dict(data) if isinstance(data, dict) else {}


def with_custom_mesh(configs: MaxTextConfigs, effective: Mapping[str, Any]) -> dict[str, Any]:
    """``effective`` with a custom mesh file's mesh_axes and rules in place, as MaxText does."""
    custom = custom_mesh_file(configs, effective)
    return {**effective, **{k: custom[k] for k in CUSTOM_KEYS if k in custom}}


# ---- the physical mesh JAX sees ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TpuKind:
    """How JAX and libtpu name one TPU family."""

    device_kind: str
    """JAX's ``device.device_kind``."""
    libtpu_prefix: str
    """Prefix of libtpu's topology names (``tpu7x:2x4x4``)."""
    chip_config: str
    """``megacore`` where one JAX device spans the chip's two TensorCores."""


TPU_KINDS: dict[Family, TpuKind] = {
    Family.V7: TpuKind("TPU7x", "tpu7x", "default"),
    Family.V6E: TpuKind("TPU v6 lite", "v6e", "default"),
    Family.V5E: TpuKind("TPU v5 lite", "v5e", "default"),
    Family.V5P: TpuKind("TPU v5", "v5", "megacore"),
    Family.V4: TpuKind("TPU v4", "v4", "megacore"),
}


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
    if slice_.family not in TPU_KINDS:
        return None
    dims = tuple(slice_.topology) + (1,) * (3 - len(slice_.topology))
    if slice_.accelerator.jax_devices_per_chip > 1:
        return PhysicalMesh((*dims, slice_.accelerator.jax_devices_per_chip), _XYZC, True)
    return PhysicalMesh(dims, _XYZC[:3], False)


_XYZC = ("x", "y", "z", "core")


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


# ---- findings -------------------------------------------------------------------------------


def _product_text(resolved: ResolvedMesh, network: str) -> str:
    parts = [
        f"{a.name}({a.ici if network == 'ici' else a.dcn})"
        for a in resolved.axes
        if (a.ici if network == "ici" else a.dcn) > 1
    ]
    return " × ".join(parts) or "1"


def _devices(n: int) -> str:
    return f"{n} JAX device" + ("s" if n != 1 else "")


def _device_text(slice_: Slice) -> str:
    per_chip = slice_.accelerator.jax_devices_per_chip
    chips = f"{slice_.chips} chip{'s' if slice_.chips > 1 else ''}"
    return f"{slice_.device_type}: {chips}" + (f" × {per_chip}" if per_chip > 1 else "")


def settings_failure(
    error: MeshError, request: MaxTextRequest, effective: Mapping[str, Any]
) -> Finding:
    """Settings MaxText cannot resolve, with proposals that multiply right (and map)."""
    slice_ = request.slice
    if error.network == "ICI":
        found = propose_ici(
            mesh_axes(effective), raw_settings(effective, "ici"), mesh_target(slice_, effective)
        )
        fix = "use one of: " + "; ".join(f"`{as_words(c)}`" for c in found) if found else error.fix
        target = f"{_devices(request.devices_per_slice)} per slice ({_device_text(slice_)})"
        return Finding("mesh-ici", Level.FAIL, f"{error.message} (target: {target})", fix)
    if error.network == "DCN":
        fix = (
            f"{error.fix}, e.g. `dcn_data_parallelism={request.num_slices}` with the other "
            "dcn_* at 1 (data parallelism across slices is what DCN suits)"
        )
        target = f"{request.num_slices} slices"
        return Finding("mesh-dcn", Level.FAIL, f"{error.message} (target: {target})", fix)
    return Finding("mesh-settings", Level.FAIL, error.message, error.fix)


def _product_findings(resolved: ResolvedMesh, request: MaxTextRequest) -> list[Finding]:
    filled = f"; {', '.join(resolved.filled)}" if resolved.filled else ""
    out = [
        Finding(
            "mesh-ici",
            Level.PASS,
            f"ICI {_product_text(resolved, 'ici')} = {_devices(resolved.devices_per_slice)} "
            f"per slice ({_device_text(request.slice)}){filled}",
        )
    ]
    if resolved.num_slices > 1:
        out.append(
            Finding(
                "mesh-dcn",
                Level.PASS,
                f"DCN {_product_text(resolved, 'dcn')} = {resolved.num_slices} slices",
            )
        )
    elif any(v not in (1, -1) for v in request_dcn(request).values()):
        given = ", ".join(f"{k}={v}" for k, v in request_dcn(request).items() if v not in (1, -1))
        out.append(
            Finding(
                "mesh-dcn",
                Level.WARN,
                f"{given} on one slice: MaxText ignores DCN settings without several slices",
                "drop them, or run on several slices (--num-slices)",
            )
        )
    return out


def request_dcn(request: MaxTextRequest) -> dict[str, int]:
    """``dcn_*`` values the command itself gives (integers only)."""
    out: dict[str, int] = {}
    for key, text in request.args.items():
        if key.startswith("dcn_") and key.endswith("_parallelism"):
            try:
                out[key] = int(text)
            except ValueError:
                continue
    return out


def mapping_finding(
    resolved: ResolvedMesh, target: MeshTarget, wanted: Mapping[str, int]
) -> Finding:
    """Whether JAX's ``create_device_mesh`` maps the ICI mesh onto the slice (pure prediction)."""
    shape = resolved.ici_shape
    slice_ = target.slice
    if target.physical is None:
        return Finding(
            "mesh-mapping",
            Level.PASS,
            f"{slice_.device_type}: JAX takes the {slice_.jax_devices} device(s) in order",
        )
    if target.allow_split:
        return Finding(
            "mesh-mapping",
            Level.PASS,
            f"allow_split_physical_axes=true: JAX may split {target.physical}'s axes",
        )
    shortcut = reorders_without_search(slice_, shape)
    if shortcut:
        return Finding(
            "mesh-mapping",
            Level.PASS,
            f"{slice_.device_type}: JAX orders {shortcut} in fixed rings, any mesh shape fits",
        )
    found = assign(target.physical.shape, shape, core_first=target.physical.core_first)
    if found.ok:
        return Finding(
            "mesh-mapping",
            Level.PASS,
            f"ICI mesh {_axes_text(resolved, found)} maps onto {slice_.device_type}'s "
            f"physical mesh {target.physical}",
        )
    return mapping_failure(resolved, target, found, wanted)


def _axes_text(resolved: ResolvedMesh, found: Assignment) -> str:
    names = _XYZC if len(found.physical) == 4 else _XYZC[:3]
    parts = [
        f"{axis.name}={axis.ici}→{'×'.join(names[i] for i in found.axes[n])}"
        for n, axis in enumerate(resolved.axes)
        if found.axes[n] and axis.ici > 1
    ]
    return "[" + ", ".join(parts) + "]"


def mapping_failure(
    resolved: ResolvedMesh, target: MeshTarget, found: Assignment, wanted: Mapping[str, int]
) -> Finding:
    """The FAIL of an ICI mesh JAX cannot map, with ranked settings that do map."""
    index = found.failed_index if found.failed_index is not None else 0
    failing_axis = resolved.axes[index]
    proposals = propose_ici(resolved.names, wanted, target, failing=failing_axis.ici_key)
    placed = _axes_text(resolved, found)
    message = (
        f"ICI mesh {list(resolved.ici_shape)} ({_product_text(resolved, 'ici')}) does not map "
        f"onto {target.slice.device_type}'s physical mesh {target.physical}: "
        + (f"after {placed}, " if placed != "[]" else "")
        + f"{failing_axis.name}={failing_axis.ici} is no product of the free physical axes "
        f"{list(found.remaining)}. JAX will raise NotImplementedError: {found.error}"
    )
    fix = (
        "use one of: " + "; ".join(f"`{as_words(c)}`" for c in proposals)
        if proposals
        else "choose ici_* values that are each a product of whole physical axes "
        f"({target.physical}), or set allow_split_physical_axes=true"
    )
    return Finding("mesh-mapping", Level.FAIL, message, fix)


def check_mesh(
    request: MaxTextRequest, configs: MaxTextConfigs, effective: Mapping[str, Any]
) -> list[Finding]:
    """ICI/DCN products and the logical → physical mapping, as MaxText and JAX will do them."""
    try:
        effective = with_custom_mesh(configs, effective)
        resolved = resolve_mesh(effective, request.devices_per_slice, request.num_slices)
    except MeshError as e:
        return [settings_failure(e, request, effective)]
    target = mesh_target(request.slice, effective)
    return [
        *_product_findings(resolved, request),
        mapping_finding(resolved, target, raw_settings(effective, "ici")),
    ]


def check_mesh_runtime(request: MaxTextRequest, runner: CommandRunner) -> list[Finding]:
    """The mapping as JAX itself does it, in the MaxText runtime (see ``mesh_runtime``)."""
    from tpu_trainer.checks.mesh_runtime import check_mesh_with_jax

    return check_mesh_with_jax(request, runner)
