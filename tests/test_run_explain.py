"""After a failed run, the family classifier's explanation from the logs the run kept
(``tpu_trainer.app.explain``): the most confident family-level line over every kept log, and
nothing when a log holds a known fatal error (the launch path reported that one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.app.explain import explain, kept_logs

pytestmark = pytest.mark.unit

AUTH = (
    "google.auth.exceptions.RefreshError: ('invalid_grant: Token has been expired or revoked.', "
    "{'error': 'invalid_grant'})"
)
QUOTA = (  # a wording no signature knows, well inside the quota family for the classifier
    "TPU request refused: the project has used its whole TPUS_PER_TPU_FAMILY quota in region "
    "us-east5 (limit 64)"
)
STEP = "I1124 00:05:01.1 1 metric_logger.py:265] completed step: 3, seconds: 0.2, loss: 10.9"
HBM = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm."


def _write(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def test_unit_the_run_folders_logs_are_read_worker_0_first(tmp_path: Path) -> None:
    _write(tmp_path / "job.log", STEP)
    _write(tmp_path / "worker0.log", STEP)
    _write(tmp_path / "train" / "1.log", STEP)
    (tmp_path / "output").mkdir()
    (tmp_path / "report.md").write_text("x", encoding="utf-8")
    assert [p.relative_to(tmp_path).as_posix() for p in kept_logs(tmp_path)] == [
        "worker0.log",
        "job.log",
        "train/1.log",
    ]


def test_unit_the_most_confident_classified_line_of_any_log_explains_the_failure(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "worker0.log", STEP, STEP, AUTH)
    _write(tmp_path / "train" / "2.log", STEP, QUOTA)
    found = explain(tmp_path)
    assert found is not None
    text = found.describe()
    assert found.match.signature in {"auth-permissions-classified", "quota-classified"}
    assert f"(by its wording, confidence {found.match.confidence:.2f}; line" in text
    assert (
        f" of {found.log}): {found.match.cause} — fix: {found.match.fix}"
        == text[text.index(" of ") :]
    )
    others = [explain(tmp_path, [tmp_path / name]) for name in ("worker0.log", "train/2.log")]
    assert all(o is not None for o in others)
    assert found.match.confidence == max(o.match.confidence or 0 for o in others if o)


def test_unit_a_known_fatal_error_in_any_log_leaves_nothing_to_add(tmp_path: Path) -> None:
    _write(tmp_path / "worker0.log", STEP, AUTH)
    _write(tmp_path / "train" / "3.log", STEP, HBM)
    assert explain(tmp_path) is None


def test_unit_a_run_without_logs_or_error_lines_has_no_explanation(tmp_path: Path) -> None:
    assert explain(tmp_path) is None
    _write(tmp_path / "worker0.log", STEP, STEP)
    assert explain(tmp_path) is None
