"""The logical mesh MaxText will build from the parallelism settings, predicted without JAX.

MaxText turns the ``ici_*``/``dcn_*`` parallelism settings into one logical mesh axis per entry
of ``mesh_axes`` (a single ``-1`` is filled with what the other axes leave). This module
resolves those sizes (and a ``custom_mesh_and_rule`` file) as MaxText does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.mesh_axes import setting_key

__all__ = [
    "CUSTOM_KEYS",
    "MeshAxis",
    "MeshError",
    "ResolvedMesh",
    "custom_mesh_file",
    "fill_unspecified",
    "mesh_axes",
    "raw_settings",
    "resolve_mesh",
    "setting_key",
    "with_custom_mesh",
]


class MeshError(TpuTrainerError):
    """Parallelism settings MaxText cannot turn into a mesh."""

    def __init__(self, message: str, *, fix: str = "", network: str = "") -> None:
        super().__init__(message, fix=fix)
        self.network = network
        """``ICI`` or ``DCN`` when the products are wrong; '' for a malformed setting."""


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
