"""What MaxText's ``train_compile`` said: the compiler's memory plan, or the error that tells
an out-of-memory step, a sharding, mesh or configuration error (pure).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from tpu_trainer.catalog.error_signatures import by_id, parse_size
from tpu_trainer.checks.aot_command import compile_topology_args
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.diagnose import diagnose


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
