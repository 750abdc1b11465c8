"""Memory fit by compiling: MaxText's ``train_compile`` for the target TPU topology, on this CPU.

The compiler's memory plan is the answer (bytes per device = argument + output − alias +
temp), or its out-of-memory error (how much the step needs and how much a device has), or a
sharding / mesh / configuration error found before any TPU is reserved. Results are kept as
JSON under ``<cache>/aot/``, keyed by what changes the compiled step, so asking again answers
at once without starting the runtime. The command is built in ``aot_command``, its output read
in ``aot_result``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tpu_trainer.checks import memory_estimate as est
from tpu_trainer.checks.aot_command import (
    ENTRY_MODULE,
    AotSetup,
    AotUnavailableError,
    aot_args,
    aot_argv,
    aot_env,
    cache_key,
    compile_topology_args,
)
from tpu_trainer.checks.aot_result import (
    AotOutcome,
    AotResult,
    MemoryStats,
    classify,
    parse_memory_stats,
    parse_result,
)
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.plan.plan import Finding, Level

__all__ = [
    "CHECK_NAME",
    "ENTRY_MODULE",
    "AotOutcome",
    "AotResult",
    "AotSetup",
    "AotUnavailableError",
    "MemoryStats",
    "aot_args",
    "aot_argv",
    "aot_env",
    "aot_findings",
    "cache_key",
    "check_aot",
    "classify",
    "compile_topology_args",
    "effective_config",
    "parse_memory_stats",
    "parse_result",
    "run_aot",
]

CHECK_NAME = "memory-fit (AOT)"
_UNCACHED = frozenset({AotOutcome.OTHER})
"""Outcomes not kept: a timeout or a crash may not happen again."""


# ---- running, with the cache ------------------------------------------------------------


def load_cached(cache: Path, key: str) -> AotResult | None:
    path = cache / f"{key}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return replace(AotResult.from_json(data["result"]), from_cache=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(cache: Path, key: str, request: MaxTextRequest, result: AotResult) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    record = {"key": key, "args": dict(request.args), "result": result.to_json()}
    partial = cache / f"{key}.json.partial"
    partial.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    partial.replace(cache / f"{key}.json")


def run_aot(
    request: MaxTextRequest,
    runner: CommandRunner,
    setup: AotSetup,
    *,
    timeout: float = 1800.0,
    use_cache: bool = True,
) -> AotResult:
    """Compile the train step for the request's topology (or answer from the cache)."""
    key = cache_key(request, setup.version)
    if use_cache and (hit := load_cached(setup.cache, key)) is not None:
        return hit
    setup.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="aot-", dir=setup.cache) as folder:
        work = Path(folder)
        (work / "tmp").mkdir()
        result = runner.run(
            aot_argv(setup, request, work), timeout=timeout, env=aot_env(request, work)
        )
        text = result.stdout + "\n" + result.stderr
        termination = work / "termination-log"
        if termination.is_file():
            text += "\n" + termination.read_text(encoding="utf-8", errors="replace")
    parsed = parse_result(text, result.code, result.seconds, request, setup.version)
    if parsed.outcome not in _UNCACHED:
        _store(setup.cache, key, request, parsed)
    return parsed


# ---- findings (pure) --------------------------------------------------------------------


def aot_findings(
    result: AotResult, request: MaxTextRequest, cfg: Mapping[str, Any] | None = None
) -> list[Finding]:
    """What a result means for the user; ``cfg`` (the effective configuration) lets the
    out-of-memory fixes say how far each would go."""
    where = f"{result.device_type}" + (f" × {result.num_slices}" if result.num_slices > 1 else "")
    when = f"AOT compile {result.seconds:.0f} s" + (", cached" if result.from_cache else "")
    if result.outcome is AotOutcome.FITS and result.memory is not None:
        available, measured = est.usable_hbm(request.slice)
        used = result.memory.per_device
        nominal = "" if measured else " nominal"
        return [
            Finding(
                CHECK_NAME,
                Level.PASS,
                f"{est.gib(used)} of {est.gib(available)}{nominal} per device "
                f"({100 * used / available:.1f} %) on {where} ({when})",
            )
        ]
    if result.outcome is AotOutcome.OUT_OF_MEMORY:
        return [_oom_finding(result, request, cfg, where, when)]
    if result.outcome is AotOutcome.SHARDING_ERROR:
        return [Finding("sharding (AOT)", Level.FAIL, f"{result.message} on {where}", result.fix)]
    if result.outcome is AotOutcome.MESH_ERROR:
        return [Finding("mesh (AOT)", Level.FAIL, f"{result.message} on {where}", result.fix)]
    if result.outcome is AotOutcome.CONFIG_ERROR:
        fix = result.fix or "correct the MaxText argument the message names"
        return [Finding("maxtext-config (AOT)", Level.FAIL, result.message, fix)]
    return [
        Finding(
            CHECK_NAME,
            Level.WARN,
            f"the AOT compile for {where} failed (exit {result.exit_code}): {result.message}",
            "run `tpu-trainer check --aot --debug` to see MaxText's whole output",
        )
    ]


def _oom_finding(
    result: AotResult,
    request: MaxTextRequest,
    cfg: Mapping[str, Any] | None,
    where: str,
    when: str,
) -> Finding:
    available = result.available_bytes or est.usable_hbm(request.slice)[0]
    needed = result.required_bytes
    if needed is None:
        return Finding(
            CHECK_NAME,
            Level.FAIL,
            f"out of HBM on {where}: {result.message}",
            result.fix or "lower per_device_batch_size or use a bigger slice",
        )
    estimate = None
    if cfg is not None:
        try:
            estimate = est.estimate_memory(cfg, request.slice, request.num_slices)
        except (KeyError, ValueError, TypeError):
            estimate = None
    fixes = est.memory_fixes(
        cfg or {}, request.slice, request.num_slices, needed, available, estimate
    )
    message = (
        f"out of memory on {where}: needs {est.gib(needed)} per device, "
        f"{est.gib(available)} available ({needed / available:.2f}×, "
        f"{est.gib(needed - available)} too much; {when})"
    )
    return Finding(CHECK_NAME, Level.FAIL, message, est.numbered(fixes))


def check_aot(
    request: MaxTextRequest,
    runner: CommandRunner,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 1800.0,
    setup: AotSetup | None = None,
) -> list[Finding]:
    """The AOT memory-fit findings for ``request`` (compiles once, then answers from cache)."""
    try:
        setup = setup or AotSetup.installed(env)
        result = run_aot(request, runner, setup, timeout=timeout)
    except AotUnavailableError as e:
        return [Finding(CHECK_NAME, Level.WARN, f"not checked: {e.message}", e.fix)]
    return aot_findings(result, request, effective_config(request, env))


def effective_config(request: MaxTextRequest, env: dict[str, str] | None) -> dict[str, Any] | None:
    from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs

    try:
        return MaxTextConfigs.load(env, fetch=False).effective(request.args)
    except TpuTrainerError:
        return None
