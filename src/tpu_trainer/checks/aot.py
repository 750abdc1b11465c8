"""Memory fit by compiling: MaxText's ``train_compile`` for the target TPU topology, on this CPU.

The compiler's memory plan is the answer (bytes per device = argument + output − alias +
temp), or its out-of-memory error (how much the step needs and how much a device has), or a
sharding / mesh / configuration error found before any TPU is reserved. Results are kept as
JSON under ``<cache>/aot/``, keyed by what changes the compiled step, so asking again answers
at once without starting the runtime.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.error_signatures import by_id, parse_size
from tpu_trainer.checks import memory_estimate as est
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

ENTRY_MODULE = "maxtext.trainers.pre_train.train_compile"
CHECK_NAME = "memory-fit (AOT)"
CACHE_FORMAT = 1

# Runs ENTRY_MODULE as ``python -m`` would, with MaxText's write to /dev/termination-log (on a
# configuration error; meant for Kubernetes) sent to a file of this compile's own folder.
_LAUNCHER = """\
import builtins, runpy, sys
_target, _module = sys.argv[1], sys.argv[2]
_open = builtins.open
def _guarded_open(file, *args, **kwargs):
    return _open(_target if file == "/dev/termination-log" else file, *args, **kwargs)
builtins.open = _guarded_open
sys.argv = [_module, *sys.argv[3:]]
runpy.run_module(_module, run_name="__main__", alter_sys=True)
"""

_SET_HERE = frozenset(
    {"run_name", "base_output_directory", "jax_cache_dir", "hardware", "log_config"}
    | {"skip_jax_distributed_system", "compile_topology", "compile_topology_num_slices"}
    | {"internal_compile", "internal_compile_num_devices", "compiled_trainstep_file"}
    | {"profiler", "profiler_steps", "skip_first_n_steps_for_profiler"}
    | {"profile_periodically_period", "upload_all_profiler_results"}
)
"""Keys the check sets itself; the recipe's values (output buckets, profilers) are dropped."""
_NOT_COMPILED = frozenset(
    {"steps", "enable_checkpointing", "async_checkpointing", "checkpoint_period", "log_period"}
    | {"dataset_path", "metrics_file", "gcs_metrics", "save_config_to_gcs", "tokenizer_path"}
)
"""Keys that do not change the compiled step (left out of the cache key, kept in the argv)."""


@dataclass(frozen=True, slots=True)
class _TargetNames:
    """How MaxText 0.2.5 names one family's compile targets (utils/accelerator_to_spec_map.py):
    ``<prefix>-N`` with N as xpk counts it, for xpk's default topology of N when N is at most
    ``named_up_to`` or in ``named_also``; any other topology goes through ``internal_compile``
    as ``<platform>:<topology>``."""

    prefix: str
    platform: str
    named_up_to: int
    named_also: frozenset[int] = frozenset()


_TARGETS = {
    Family.V7: _TargetNames("tpu7x", "tpu7x", 12288, frozenset({13824, 16384, 17920, 18432})),
    Family.V6E: _TargetNames("v6e", "v6e", 256),
    Family.V5E: _TargetNames("v5e", "v5e", 256),
    Family.V5P: _TargetNames("v5p", "v5", 12288, frozenset({13824, 17920})),
    Family.V4: _TargetNames(
        "v4", "v4", 0, frozenset({8, 16, 32, 64, 128, 256, 384, 512, 1024, 1536, 2048, 4096})
    ),
}


class AotOutcome(StrEnum):
    FITS = "fits"
    OUT_OF_MEMORY = "out_of_memory"
    SHARDING_ERROR = "sharding_error"
    MESH_ERROR = "mesh_error"
    CONFIG_ERROR = "config_error"
    OTHER = "other"


_BY_SIGNATURE = {
    "hbm-oom-compile": AotOutcome.OUT_OF_MEMORY,
    "hbm-oom-legacy": AotOutcome.OUT_OF_MEMORY,
    "fsdp-indivisible": AotOutcome.SHARDING_ERROR,
    "fsdp-indivisible-legacy": AotOutcome.SHARDING_ERROR,
    "mesh-assignment": AotOutcome.MESH_ERROR,
    "maxtext-unknown-key": AotOutcome.CONFIG_ERROR,
}
"""Error catalog signatures (``catalog/error_signatures.py``) and what they mean here."""
_OTHER_SIGNS: tuple[tuple[re.Pattern[str], AotOutcome, str], ...] = (
    (re.compile(r"\[tpu-trainer\] (?P<text>timed out after \d+ s|stopped)"), AotOutcome.OTHER, ""),
    (re.compile(r"MAXTEXT CONFIG ERROR: (?P<text>.*)"), AotOutcome.CONFIG_ERROR, ""),
    (
        re.compile(r"Unknown command line flag '(?P<text>[^']+)'"),
        AotOutcome.CONFIG_ERROR,
        "remove --{text} from the recipe's XLA flags (LIBTPU_INIT_ARGS): the libtpu of this "
        "MaxText runtime does not know it",
    ),
    (
        re.compile(r"Invalid compile topology: (?P<text>\S+)"),
        AotOutcome.CONFIG_ERROR,
        "MaxText has no compile target of that name; check the slice's device type",
    ),
    (re.compile(r"(?P<text>\w*IndivisibleError: .*)"), AotOutcome.SHARDING_ERROR, ""),
    (re.compile(r"(?P<text>RESOURCE_EXHAUSTED: .*)"), AotOutcome.OUT_OF_MEMORY, ""),
)
"""Lines the catalog does not know, tried in order when no catalog signature matched."""
_STATS = re.compile(r"CompiledMemoryStats\((?P<fields>[^)]*)\)")
_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception)|RESOURCE_EXHAUSTED|INTERNAL)\b.*")
_UNCACHED = frozenset({AotOutcome.OTHER})
"""Outcomes not kept: a timeout or a crash may not happen again."""


class AotUnavailableError(TpuTrainerError):
    """The MaxText runtime, which holds the compiler, is not installed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStats:
    """XLA's ``CompiledMemoryStats`` of the train step, bytes per device."""

    argument: int
    output: int
    alias: int
    temp: int
    generated_code: int = 0

    @property
    def per_device(self) -> int:
        return self.argument + self.output - self.alias + self.temp


@dataclass(frozen=True, slots=True, kw_only=True)
class AotResult:
    """What compiling the train step for one topology said."""

    outcome: AotOutcome
    device_type: str
    """The slice, topology form (``tpu7x-2x2x1``)."""
    compile_topology: str
    """MaxText's name for it (``tpu7x-8``), or the topology itself for ``internal_compile``."""
    num_slices: int
    seconds: float
    """Wall time of the compile (of the original one, for a cached answer)."""
    exit_code: int
    maxtext_version: str
    memory: MemoryStats | None = None
    required_bytes: float | None = None
    """Out of memory: what the step needs per device."""
    available_bytes: float | None = None
    """Out of memory: what a device has."""
    message: str = ""
    """The error line, for failures."""
    fix: str = ""
    """The error catalog's fix, when a catalog signature matched."""
    from_cache: bool = False

    @property
    def bytes_per_device(self) -> float | None:
        if self.memory is not None:
            return float(self.memory.per_device)
        return self.required_bytes

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data.pop("from_cache")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AotResult:
        fields = dict(data)
        memory = fields.pop("memory", None)
        return cls(
            **{**fields, "outcome": AotOutcome(fields["outcome"])},
            memory=MemoryStats(**memory) if memory else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AotSetup:
    """Where the compiler lives and where answers are kept."""

    python: Path
    maxtext_dir: Path
    """The installed ``maxtext`` package (its ``configs/`` hold base.yml)."""
    version: str
    cache: Path
    """Folder of cached results (``<cache>/aot``)."""

    @classmethod
    def installed(cls, env: dict[str, str] | None = None) -> AotSetup:
        from tpu_trainer.infra.tool_env import cache_dir
        from tpu_trainer.runtime.manager import MAXTEXT, is_installed, runtime_python

        python = runtime_python(MAXTEXT, env)
        found = sorted(python.parent.parent.glob("lib/python3*/site-packages/maxtext"))
        if not is_installed(MAXTEXT, env) or not found:
            raise AotUnavailableError(
                f"the MaxText {MAXTEXT.version} runtime (which holds the AOT compiler) is "
                "not installed",
                fix="run `tpu-trainer runtime install maxtext` (about 8 minutes, 2.8 GB)",
            )
        return cls(
            python=python,
            maxtext_dir=found[0],
            version=MAXTEXT.version,
            cache=cache_dir(env) / "aot",
        )


# ---- the command (pure) -----------------------------------------------------------------


def compile_topology_args(slice_: Slice, num_slices: int = 1) -> list[str]:
    """``compile_topology=...`` and friends for ``slice_``: MaxText's name (``tpu7x-8``,
    ``tpu7x-256`` for 4x4x8, ``v6e-16``, ``v5p-128``) where it has one for this topology,
    else the topology through ``internal_compile`` (``tpu7x:4x4x16``)."""
    names = _TARGETS.get(slice_.family)
    if names is None:
        raise AotUnavailableError(
            f"{slice_.accelerator.name} has no AOT compile target",
            fix="check a TPU slice (tpu7x-..., v6e-..., v5p-...)",
        )
    number = slice_.xpk_number
    default = Slice.parse(slice_.device_type_number).topology == slice_.topology
    named = number <= names.named_up_to or number in names.named_also
    slices = f"compile_topology_num_slices={num_slices}"
    if default and named:
        return [f"compile_topology={names.prefix}-{number}", slices]
    return [
        f"compile_topology={names.platform}:{slice_.topology_name}",
        "internal_compile=true",
        f"internal_compile_num_devices={slice_.jax_devices * num_slices}",
        slices,
    ]


def base_config_path(maxtext_dir: Path, recipe_base: str) -> Path:
    """The recipe's base config (``maxtext/configs/base.yml``) inside the installed package."""
    return maxtext_dir / "configs" / recipe_base.split("configs/", 1)[-1]


def aot_args(request: MaxTextRequest, work: Path) -> list[str]:
    """The recipe's MaxText arguments with the local ones replaced (pure)."""
    kept = [f"{k}={v}" for k, v in request.args.items() if k not in _SET_HERE]
    return [
        f"run_name=aot-{request.slice.device_type}",
        f"base_output_directory={work / 'output'}",
        f"jax_cache_dir={work / 'jax_cache'}",
        "log_config=false",
        *kept,
        *compile_topology_args(request.slice, request.num_slices),
    ]


def aot_argv(setup: AotSetup, request: MaxTextRequest, work: Path) -> list[str]:
    """``python -c <launcher> <termination file> train_compile <base.yml> key=value ...``."""
    return [
        str(setup.python),
        "-c",
        _LAUNCHER,
        str(work / "termination-log"),
        ENTRY_MODULE,
        str(base_config_path(setup.maxtext_dir, request.base_config)),
        *aot_args(request, work),
    ]


def aot_env(request: MaxTextRequest, work: Path) -> dict[str, str]:
    """Compile-only settings: no TPU is opened, libtpu's lock and temp files stay private."""
    env = {
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
        "JAX_PLATFORMS": "cpu",
        "TMPDIR": str(work / "tmp"),
        "PYTHONUNBUFFERED": "1",
    }
    if request.xla_flags:
        env["LIBTPU_INIT_ARGS"] = " ".join(request.xla_flags)
    return env


def cache_key(request: MaxTextRequest, version: str) -> str:
    """sha256 of what decides the compiled step: arguments, MaxText version, slice, slices."""
    args = sorted((k, v) for k, v in request.args.items() if k not in _SET_HERE | _NOT_COMPILED)
    material = {
        "format": CACHE_FORMAT,
        "args": args,
        "base_config": request.base_config.split("configs/", 1)[-1],
        "maxtext": version,
        "topology": request.slice.device_type,
        "num_slices": request.num_slices,
        "xla_flags": list(request.xla_flags),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


# ---- reading the output (pure) ----------------------------------------------------------


def parse_memory_stats(text: str) -> MemoryStats | None:
    m = _STATS.search(text)
    if m is None:
        return None
    values = dict(re.findall(r"(\w+)_size_in_bytes=(\d+)", m.group("fields")))
    if not {"argument", "output", "alias", "temp"} <= values.keys():
        return None
    return MemoryStats(
        argument=int(values["argument"]),
        output=int(values["output"]),
        alias=int(values["alias"]),
        temp=int(values["temp"]),
        generated_code=int(values.get("generated_code", 0)),
    )


def _oom_sizes(text: str) -> tuple[float | None, float | None]:
    for sig in ("hbm-oom-compile", "hbm-oom-legacy"):
        m = by_id(sig).pattern.search(text)
        if m:
            return parse_size(m.group("needed")), parse_size(m.group("available"))
    return None, None


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if _ERROR_LINE.match(ln)]
    if lines:
        return lines[-1][:400]
    tail = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return tail[-1][:400] if tail else ""


def classify(text: str, code: int) -> tuple[AotOutcome, str, str]:
    """The outcome, the line that tells it, and the catalog's fix (if any)."""
    if code == 0:
        if parse_memory_stats(text) is not None:
            return AotOutcome.FITS, "", ""
        return AotOutcome.OTHER, "the compile ended without a memory analysis", ""
    for match in diagnose(text.splitlines()):
        if match.signature in _BY_SIGNATURE:
            return _BY_SIGNATURE[match.signature], match.excerpt, match.fix
    for pattern, outcome, fix in _OTHER_SIGNS:
        m = pattern.search(text)
        if m:
            found = m.group("text").strip()[:400]
            return outcome, found, fix.format(text=found)
    return AotOutcome.OTHER, _last_error(text), ""


def parse_result(
    text: str, code: int, seconds: float, request: MaxTextRequest, version: str
) -> AotResult:
    """An :class:`AotResult` from ``train_compile``'s combined output and exit status."""
    outcome, message, fix = classify(text, code)
    required, available = _oom_sizes(text) if outcome is AotOutcome.OUT_OF_MEMORY else (None, None)
    return AotResult(
        outcome=outcome,
        device_type=request.slice.device_type,
        compile_topology=compile_topology_args(request.slice, request.num_slices)[0].split("=")[1],
        num_slices=request.num_slices,
        seconds=round(seconds, 2),
        exit_code=code,
        maxtext_version=version,
        memory=parse_memory_stats(text) if outcome is AotOutcome.FITS else None,
        required_bytes=required,
        available_bytes=available,
        message=message,
        fix=fix,
    )


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
