"""The device mesh MaxText will build, checked before any TPU is asked for: the findings.

The ICI/DCN products (``mesh_resolve``) and the logical → physical mapping (``mesh_mapping``)
as MaxText and JAX will do them, with settings that work when they do not. ``mesh_runtime``
asks JAX itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_trainer.checks.mesh_mapping import (
    XYZC,
    Assignment,
    MeshTarget,
    PhysicalMesh,
    as_words,
    assign,
    mesh_target,
    physical_mesh,
    propose_ici,
    reorders_without_search,
)
from tpu_trainer.checks.mesh_resolve import (
    MeshError,
    ResolvedMesh,
    custom_mesh_file,
    fill_unspecified,
    mesh_axes,
    raw_settings,
    resolve_mesh,
    setting_key,
    with_custom_mesh,
)
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

__all__ = [
    "Assignment",
    "MeshError",
    "MeshTarget",
    "PhysicalMesh",
    "ResolvedMesh",
    "as_words",
    "assign",
    "check_mesh",
    "custom_mesh_file",
    "fill_unspecified",
    "mapping_finding",
    "mesh_axes",
    "mesh_target",
    "physical_mesh",
    "propose_ici",
    "raw_settings",
    "resolve_mesh",
    "setting_key",
    "with_custom_mesh",
]


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
    names = XYZC if len(found.physical) == 4 else XYZC[:3]
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
