"""The mesh mapping asked of JAX itself: real TPU topology devices, JAX's create_device_mesh.

Runs the ``mesh_probe`` in the MaxText runtime (about a second, no TPU needed) with the
command's ICI mesh and the pure check's proposals, and reports JAX's own answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpu_trainer.catalog.tpu_kinds import tpu_kinds
from tpu_trainer.checks import mesh_mapping, mesh_resolve
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice
from tpu_trainer.runtime.manager import MAXTEXT, is_installed, runtime_python
from tpu_trainer.runtime.probe import run_probe

NAME = "mesh-mapping (JAX)"


@dataclass(frozen=True, slots=True)
class JaxMeshResult:
    """JAX's answer for one logical mesh shape."""

    shape: tuple[int, ...]
    ok: bool
    error: str = ""
    """Exception type (``NotImplementedError``)."""
    message: str = ""


@dataclass(frozen=True, slots=True)
class JaxTopology:
    """One topology as JAX built it, and its answers."""

    topology: str
    device_kind: str
    devices: int
    physical_mesh: tuple[int, ...]
    results: tuple[JaxMeshResult, ...]
    error: str = ""
    """Why the topology itself could not be built ('' when it was)."""

    def result(self, shape: Sequence[int]) -> JaxMeshResult | None:
        return next((r for r in self.results if r.shape == tuple(shape)), None)


def topology_case(slice_: Slice, shapes: Sequence[Sequence[int]]) -> dict[str, Any]:
    """The probe's description of one slice (libtpu's names, as MaxText's AOT path gives them)."""
    kind = tpu_kinds().get(slice_.family)
    if kind is None:
        raise TpuTrainerError(
            f"{slice_.device_type} has no TPU topology for JAX to build",
            fix="the mesh check for CPU slices needs no runtime",
        )
    dims = slice_.topology
    wrap = [min(dims) >= 4] * 3 if len(dims) == 3 else [d >= 16 for d in dims] + [False]
    return {
        "topology": f"{kind.libtpu_prefix}:{slice_.topology_name}",
        "chip_config": kind.chip_config,
        "chips_per_host_bounds": [1, 1, 1] if slice_.chips == 1 else [2, 2, 1],
        "wrap": wrap,
        "shapes": [list(s) for s in shapes],
    }


def parse_topology(answer: Mapping[str, Any]) -> JaxTopology:
    results = tuple(
        JaxMeshResult(
            tuple(int(n) for n in r["shape"]),
            bool(r["ok"]),
            str(r.get("error", "")),
            str(r.get("message", "")),
        )
        for r in answer.get("results", [])
    )
    error = answer.get("error")
    return JaxTopology(
        str(answer.get("topology", "")),
        str(answer.get("device_kind", "")),
        int(answer.get("devices", 0)),
        tuple(int(n) for n in answer.get("physical_mesh", [])),
        results,
        f"{error}: {answer.get('message', '')}" if error else "",
    )


def ask_jax(
    runner: CommandRunner,
    cases: Sequence[tuple[Slice, Sequence[Sequence[int]]]],
    *,
    python: Path | None = None,
) -> tuple[JaxTopology, ...]:
    """Build each slice's devices in the runtime and ask JAX for each shape, in one process."""
    payload = {"cases": [topology_case(s, shapes) for s, shapes in cases]}
    answer = run_probe(runner, python or runtime_python(MAXTEXT), "mesh_probe", payload)
    return tuple(parse_topology(case) for case in answer.get("cases", []))


def check_mesh_with_jax(
    request: MaxTextRequest, runner: CommandRunner, configs: MaxTextConfigs | None = None
) -> list[Finding]:
    """``mesh-mapping (JAX)``: JAX's verdict on the command's ICI mesh, with proposals JAX
    accepted, and a warning if the pure prediction disagrees with JAX."""
    physical = mesh_mapping.physical_mesh(request.slice)
    if physical is None:
        return []
    if not is_installed(MAXTEXT):
        return [
            Finding(
                NAME,
                Level.WARN,
                "not asked: the MaxText runtime is not installed",
                "run `tpu-trainer runtime install maxtext`",
            )
        ]
    try:
        configs = configs or MaxTextConfigs.load()
        effective = mesh_resolve.with_custom_mesh(configs, configs.effective(request.args))
        resolved = mesh_resolve.resolve_mesh(
            effective, request.devices_per_slice, request.num_slices
        )
    except TpuTrainerError:
        return []  # the fast checks report unresolvable settings and unknown models
    target = mesh_mapping.mesh_target(request.slice, effective)
    wanted = mesh_resolve.raw_settings(effective, "ici")
    predicted = target.maps(resolved.ici_shape)
    failing = (
        resolved.axes[predicted.failed_index].ici_key
        if predicted is not None and predicted.failed_index is not None
        else None
    )
    proposals = mesh_mapping.propose_ici(resolved.names, wanted, target, failing=failing, limit=5)
    shapes = [resolved.ici_shape] + [_shape(resolved, p) for p in proposals]
    started = time.perf_counter()
    try:
        (answer,) = ask_jax(runner, [(request.slice, shapes)])
    except (TpuTrainerError, ValueError) as e:
        return [Finding(NAME, Level.WARN, f"JAX could not be asked: {e}", "run again with --debug")]
    seconds = time.perf_counter() - started
    return jax_findings(resolved, target, answer, proposals, seconds)


def _shape(resolved: mesh_resolve.ResolvedMesh, choice: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(choice.get(a.ici_key or "", 1) for a in resolved.axes)


def jax_findings(
    resolved: mesh_resolve.ResolvedMesh,
    target: mesh_mapping.MeshTarget,
    answer: JaxTopology,
    proposals: Sequence[Mapping[str, int]],
    seconds: float,
) -> list[Finding]:
    """Turn JAX's answers into findings (pure)."""
    slice_ = target.slice
    if answer.error:
        return [Finding(NAME, Level.WARN, f"JAX could not build {slice_}: {answer.error}")]
    mine = answer.result(resolved.ici_shape)
    if mine is None:
        return [Finding(NAME, Level.WARN, "JAX gave no answer for the command's mesh")]
    where = (
        f"{slice_.device_type} ({answer.device_kind}, physical mesh {list(answer.physical_mesh)})"
    )
    out: list[Finding] = []
    if mine.ok:
        out.append(
            Finding(
                NAME,
                Level.PASS,
                f"JAX builds ICI mesh {list(resolved.ici_shape)} on {where} ({seconds:.1f} s)",
            )
        )
    else:
        accepted = [p for p in proposals if (r := answer.result(_shape(resolved, p))) and r.ok]
        fix = (
            "use one of (JAX accepts each): "
            + "; ".join(f"`{mesh_mapping.as_words(p)}`" for p in accepted[:3])
            if accepted
            else "choose ici_* values that are each a product of whole physical axes"
        )
        out.append(Finding(NAME, Level.FAIL, f"on {where}: {mine.error}: {mine.message}", fix))
    out += _disagreements(target, answer)
    return out


def _disagreements(target: mesh_mapping.MeshTarget, answer: JaxTopology) -> list[Finding]:
    """Where the pure prediction and JAX differ (physical mesh, verdict or message)."""
    notes: list[str] = []
    kind = tpu_kinds().get(target.slice.family)
    if kind is not None and kind.device_kind != answer.device_kind:
        notes.append(f"device kind {answer.device_kind} (predicted {kind.device_kind})")
    if target.physical is not None and target.physical.shape != answer.physical_mesh:
        notes.append(
            f"physical mesh {list(answer.physical_mesh)} (predicted {list(target.physical.shape)})"
        )
    for result in answer.results:
        predicted = target.maps(result.shape)
        ok = predicted is None or predicted.ok
        text = "" if predicted is None else predicted.error
        if ok != result.ok or (not result.ok and text != result.message):
            notes.append(f"shape {list(result.shape)}: JAX {'ok' if result.ok else 'fails'}")
    if not notes:
        return []
    return [
        Finding(
            "mesh-mapping (prediction)",
            Level.WARN,
            "the instant mesh check disagrees with this JAX: " + "; ".join(notes),
            "trust JAX's answer above; the instant check follows JAX "
            f"{_JAX_CHECKED} and may need updating",
        )
    ]


_JAX_CHECKED = "0.12.0.1"
