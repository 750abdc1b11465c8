"""Data sufficiency: will the dataset last for the steps asked, or end the run in StopIteration?

lines needed = steps × devices × batch × sequence length ÷ tokens per line (packed data), or
steps × global batch lines when each line is one sequence (``packing=false``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpu_trainer.plan.plan import Finding, Level

NAME = "data-sufficiency"
CHARS_PER_TOKEN = 4.0
"""A common rough figure for English text with SentencePiece/BPE tokenizers (an estimate)."""
SAMPLE_LINES = 2000


@dataclass(frozen=True, slots=True)
class DataNeed:
    steps: int
    global_batch: int
    """Sequences per step, all slices and accumulation steps together."""
    sequence_length: int
    packing: bool
    epochs: int

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.sequence_length

    def lines_needed(self, tokens_per_line: float) -> int:
        if not self.packing:
            return self.steps * self.global_batch * self.epochs
        per_line = min(max(tokens_per_line, 1.0), float(self.sequence_length))
        return math.ceil(self.steps * self.tokens_per_step / per_line / self.epochs)

    def steps_covered(self, lines: int, tokens_per_line: float) -> int:
        if not self.packing:
            return lines * self.epochs // max(self.global_batch, 1)
        per_line = min(max(tokens_per_line, 1.0), float(self.sequence_length))
        return int(lines * per_line * self.epochs // max(self.tokens_per_step, 1))


@dataclass(frozen=True, slots=True)
class DataSample:
    lines: int
    tokens_per_line: float
    """Estimated from characters (``CHARS_PER_TOKEN``) of the text columns."""


def need_of(config: Mapping[str, Any], devices: int, num_slices: int) -> DataNeed:
    """What one run consumes, from MaxText's effective configuration."""
    batch = float(config.get("per_device_batch_size", 1) or 1)
    accumulation = int(config.get("gradient_accumulation_steps", 1) or 1)
    return DataNeed(
        steps=int(config.get("steps", 0) or 0),
        global_batch=max(1, math.ceil(batch * devices * num_slices * accumulation)),
        sequence_length=int(config.get("max_target_length", 2048) or 2048),
        packing=bool(config.get("packing", True)),
        epochs=max(1, int(config.get("num_epoch", 1) or 1)),
    )


def data_files(config: Mapping[str, Any]) -> list[str]:
    """The training files a configuration names (hf_train_files, grain_train_files, ...)."""
    out: list[str] = []
    for key in ("hf_train_files", "grain_train_files"):
        value = str(config.get(key) or "")
        out += [part for part in value.replace(";", ",").split(",") if part]
    return out


def _text_length(line: str, columns: Iterable[str]) -> int:
    stripped = line.strip()
    if stripped.startswith("{"):
        try:
            row = json.loads(stripped)
        except json.JSONDecodeError:
            return len(stripped)
        if isinstance(row, dict):
            return sum(len(str(row.get(c, ""))) for c in columns)
    return len(stripped)


def sample_file(path: Path, columns: Iterable[str] = ("text",)) -> DataSample:
    """Count a local text/JSONL file's lines and estimate its tokens per line from a sample."""
    cols = tuple(columns)
    lines = 0
    sampled = 0
    chars = 0
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            lines += 1
            if sampled < SAMPLE_LINES:
                sampled += 1
                chars += _text_length(line, cols)
    per_line = (chars / sampled / CHARS_PER_TOKEN) if sampled else 0.0
    return DataSample(lines, per_line)


def check_data(
    config: Mapping[str, Any], devices: int, num_slices: int, *, base: Path | None = None
) -> list[Finding]:
    """Findings for the dataset of an effective MaxText configuration."""
    kind = str(config.get("dataset_type", "synthetic"))
    need = need_of(config, devices, num_slices)
    if kind == "synthetic":
        return [Finding(NAME, Level.PASS, "synthetic data: nothing to run out of")]
    files = data_files(config)
    summary = (
        f"{need.steps} steps × {need.global_batch} sequences × {need.sequence_length} tokens "
        f"= {need.steps * need.tokens_per_step:,} tokens"
    )
    local = [
        Path(f.removeprefix("file://")) if base is None else base / f.removeprefix("file://")
        for f in files
        if "://" not in f or f.startswith("file://")
    ]
    readable = [p for p in local if p.is_file()]
    if not readable:
        where = ", ".join(files) or str(config.get("dataset_path") or config.get("hf_path") or "")
        return [
            Finding(
                NAME,
                Level.WARN,
                f"{kind} data ({where or 'not named'}) is not reachable from here; the run needs "
                f"{summary} (≈ {need.lines_needed(1000):,} lines at 1,000 tokens a line)",
                fix="keep steps × global batch within the dataset, or copy a sample here and "
                "point hf_train_files/grain_train_files at it to have it counted",
            )
        ]
    columns = config.get("train_data_columns") or ["text"]
    samples = [sample_file(p, [str(c) for c in columns]) for p in readable]
    lines = sum(s.lines for s in samples)
    per_line = sum(s.tokens_per_line * s.lines for s in samples) / lines if lines else 0.0
    needed = need.lines_needed(per_line)
    covered = need.steps_covered(lines, per_line)
    basis = (
        f"{lines:,} lines of ≈ {per_line:,.0f} tokens (estimated at {CHARS_PER_TOKEN:g} "
        f"characters a token)"
    )
    if lines >= needed:
        return [Finding(NAME, Level.PASS, f"{basis} cover the {summary}")]
    return [
        Finding(
            NAME,
            Level.FAIL,
            f"{basis} last ≈ {covered} of {need.steps} steps ({summary}, ≈ {needed:,} lines "
            "needed); the run would end in StopIteration",
            fix=f"lower steps to {max(covered, 1)}, or give ≥ {needed:,} lines of data "
            f"(or a smaller per_device_batch_size / max_target_length)",
        )
    ]
