"""Data sufficiency: seed 001's 500-line dataset runs out after 7 of 10 steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpu_trainer.checks.data import check_data, need_of, sample_file
from tpu_trainer.plan.plan import Level

pytestmark = pytest.mark.unit

# Seed 001: 64 devices × batch 1 × 4096 tokens = 262,144 tokens a step.
SEED = {
    "dataset_type": "hf",
    "per_device_batch_size": 1,
    "max_target_length": 4096,
    "steps": 10,
    "packing": True,
}


def _jsonl(path: Path, lines: int, chars: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(json.dumps({"text": ("w" * (chars - 6)) + f"{i:06d}", "id": i}) + "\n")
    return path


def test_seed_dataset_runs_out_and_names_the_numbers(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "test-dataset.jsonl", 500, 14_800)  # ≈ 3,700 tokens a line
    findings = check_data({**SEED, "hf_train_files": str(data)}, devices=64, num_slices=1)
    assert [f.status for f in findings] == [Level.FAIL]
    message, fix = findings[0].message, findings[0].fix
    assert "500 lines" in message
    assert "≈ 7 of 10 steps" in message
    assert "2,621,440 tokens" in message
    assert "StopIteration" in message
    assert "lower steps to 7" in fix
    assert "709 lines" in fix  # ceil(10 × 262,144 / 3,700)


def test_enough_data_passes(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "big.jsonl", 800, 14_800)
    findings = check_data({**SEED, "hf_train_files": str(data)}, devices=64, num_slices=1)
    assert [f.status for f in findings] == [Level.PASS]


def test_unpacked_data_needs_one_line_per_sequence(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "short.jsonl", 600, 40)
    config = {**SEED, "hf_train_files": str(data), "packing": False}
    findings = check_data(config, devices=64, num_slices=1)
    assert findings[0].status is Level.FAIL
    assert "640 lines" in findings[0].fix  # 10 steps × 64 sequences
    assert need_of(config, 64, 2).global_batch == 128  # slices multiply the batch


def test_synthetic_and_unreachable_data() -> None:
    assert check_data({**SEED, "dataset_type": "synthetic"}, 64, 1)[0].status is Level.PASS
    remote = check_data({**SEED, "hf_train_files": "gs://bucket/train-*.jsonl"}, 64, 1)
    assert remote[0].status is Level.WARN
    assert "not reachable" in remote[0].message


def test_plain_text_lines_are_sampled(tmp_path: Path) -> None:
    path = tmp_path / "plain.txt"
    path.write_text("abcd" * 100 + "\n\n" + "abcd" * 300 + "\n", encoding="utf-8")
    sample = sample_file(path)
    assert sample.lines == 2
    assert sample.tokens_per_line == 200.0
