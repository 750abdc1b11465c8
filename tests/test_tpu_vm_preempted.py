"""A TPU VM taken back mid-run: the node reads PREEMPTED and MaxText's log stops with its
SIGTERM line. Without --auto-resume the run ends interrupted; with it the VM is deleted, made
again, and the same run_name restores the last durable checkpoint (fake cloud). `resume RUN`
carries an interrupted run on, on its VM while READY, else on one made again; a crashed run's
program left on its READY VM is followed again."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env
from resume_checks import (
    endings,
    live_resources,
    segments,
    shown_run,
    store_db,
    the_run,
    tpu_trainer,
)
from tpu_trainer.fakecloud.state import read_state, transaction

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "tpu_vm" / "maxtext_preempted.yaml"
STEPS = ("--set", "steps=50", "--set", "checkpoint_period=10", "--set", "enable_checkpointing=true")


def _recipe(tmp_path: Path) -> Path:
    """The tinyllama recipe on a v6e-8 (two workers)."""
    recipe = tmp_path / "recipes" / "tinyllama-8b" / "8k-bf16-v6e-2x4" / "xpk"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], recipe)
    script = recipe / "run_recipe.sh"
    script.write_text(
        script.read_text().replace("--device-type=tpu7x-2x2x1", "--device-type=v6e-2x4")
    )
    return recipe


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    rehearse = ("--rehearse", str(SCENARIO), "--poll", "0.01", *STEPS, *extra)
    return tpu_trainer(tmp_path, "train", str(_recipe(tmp_path)), "--backend", "tpu-vm", *rehearse)


def _nothing_left(tmp_path: Path) -> None:
    assert read_state(tmp_path / "rehearsal" / "state.json")["tpu_vm"]["nodes"] == {}
    assert live_resources(store_db(tmp_path)) == []


def test_a_preempted_tpu_vm_is_made_again_and_the_run_resumes_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--auto-resume")  # bare: the default budget
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    run_id, status, error = the_run(tmp_path, "id, status, error")
    assert (status, error) == ("succeeded", None)
    assert segments(store_db(tmp_path)) == [
        (1, "preempted", 34, 30, None, None),
        (2, None, 49, 40, 30, 4),
    ]
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    creates = [c for c in calls if "tpu-vm create" in c]
    assert len(creates) == 2 and creates[0] == creates[1]  # the same VM, asked the same way
    assert any("tpu-vm describe" in c for c in calls)  # the cloud's word: PREEMPTED
    assert "TPU VM" in out and "is PREEMPTED" in out
    log = (tmp_path / "store" / "runs" / run_id / "worker0.log").read_text(encoding="utf-8")
    assert "completed step: 31," in log.split("restoring from this run's directory step 30")[1]
    said = "1 interruption(s) resumed: 4 step(s) redone"
    assert said in out
    readme = (tmp_path / "store" / "runs" / run_id / "README.md").read_text(encoding="utf-8")
    assert said in readme  # the README row's note
    assert endings(tmp_path, run_id) == [("preempted", None, False), ("finished", 4, True)]
    _badput_measured(shown_run(tmp_path, run_id)["timeline"])
    _nothing_left(tmp_path)


def _badput_measured(timeline: dict[str, Any]) -> None:
    """What the log and the segments measured: steps 31-34 (2.7 s each) were run twice, saves
    at steps 0, 10, 20, 30 and 40 blocked 0.18 s each (Orbax's records), the restore took
    4.21 s; no data-batch retry. Each bucket holds at most what was measured (a rehearsal's
    steps are scaled into its short training stage, so a bucket can be cut to fit)."""
    measured = timeline["log_measured"]
    assert measured["wasted_steps"] == pytest.approx(4 * 2.7)
    assert measured["checkpoint_save"] == pytest.approx(5 * 0.18)
    assert measured["checkpoint_restore"] == pytest.approx(4.21)
    assert measured["data_loading"] is None
    buckets = {name: b["seconds"] for name, b in timeline["badput"].items()}
    assert 0 < buckets["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] <= 5 * 0.18 + 1e-3
    assert buckets["WASTED_PROGRESS_FROM_DISRUPTION"] <= 4 * 2.7 + 1e-3
    assert buckets["UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"] <= 4.21 + 1e-3
    assert buckets["DATA_LOADING_SYNC"] == 0


def test_without_auto_resume_a_preempted_tpu_vm_run_ends_interrupted(tmp_path: Path) -> None:
    proc = _train(tmp_path)
    assert proc.returncode != 0
    status, error = the_run(tmp_path, "status, error")
    assert status == "interrupted"
    assert error.startswith("interrupted at step 34 of 50 (preempted: ")
    assert "last durable checkpoint: step 30" in error
    assert segments(store_db(tmp_path), "n, cause") == [(1, "preempted")]
    _nothing_left(tmp_path)


def test_a_tpu_vm_run_without_checkpoints_is_warned_before_the_vm_is_asked_for(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--set", "enable_checkpointing=false")
    out = proc.stdout + proc.stderr
    warned = out.find("checkpointing is off")
    assert warned >= 0, out[-3000:]
    assert 0 <= warned < out.find("[provision]")


TRANSIENT = SCENARIO.parent / "transient_reset.yaml"


def test_a_transient_error_is_retried_on_its_own_budget_and_each_segment_says_why(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--rehearse", str(TRANSIENT), "--auto-resume", "0")
    assert proc.returncode != 0
    status, error = the_run(tmp_path, "status, error")
    assert status == "failed" and "A TPU worker connection dropped" in error
    why = "transient error: A TPU worker connection dropped (transient)"
    # the default --max-error-retries 1: one retry on a VM made again, then the run fails
    assert segments(store_db(tmp_path), "n, cause") == [(1, why), (2, why)]
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    assert len([c for c in calls if "tpu-vm create" in c]) == 2
    _nothing_left(tmp_path)


def _creates(tmp_path: Path) -> list[str]:
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    return [c for c in calls if "tpu-vm create" in c]


def test_resume_carries_an_interrupted_tpu_vm_run_on_to_a_vm_made_again(tmp_path: Path) -> None:
    assert _train(tmp_path).returncode != 0  # preempted at step 34, the VM deleted
    (run_id,) = the_run(tmp_path, "id")
    again = tpu_trainer(tmp_path, "resume", run_id, "--rehearse", str(SCENARIO), "--poll", "0.01")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert f"resuming run {run_id}: TPU VM " in out and "the next segment makes it again" in out
    assert the_run(tmp_path, "status, error") == ("succeeded", None)
    assert segments(store_db(tmp_path)) == [
        (1, "preempted", 34, 30, None, None),
        (2, None, 49, 40, 30, 4),
    ]
    creates = _creates(tmp_path)
    assert len(creates) == 2 and creates[0] == creates[1]
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    names = [re.findall(r"run_name=([\w.-]+)", c) for c in calls if "setsid nohup" in c]
    assert len(names) == 2 and names[0] == names[1] != []  # MaxText restores under it
    _nothing_left(tmp_path)


HANG = SCENARIO.parent / "maxtext_hang.yaml"


def test_resume_of_a_crashed_tpu_vm_run_follows_its_program_again_on_its_vm(
    tmp_path: Path,
) -> None:
    argv = ["train", str(_recipe(tmp_path)), "--backend", "tpu-vm", "--set", "steps=5"]
    rehearse = ["--rehearse", str(HANG), "--poll", "0.01"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tpu_trainer", *argv, *rehearse],
        env=cli_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:  # the program has printed its last step and still runs: the run's process dies
        deadline = time.monotonic() + 240
        while not any(
            "completed step: 4," in log.read_text(encoding="utf-8")
            for log in (tmp_path / "store" / "runs").glob("*/worker0.log")
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no step 4 in time"
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait(30)
    state = tmp_path / "rehearsal" / "state.json"
    with transaction(state) as cloud:  # from now on the program ends by itself
        cloud["tpu_vm"]["behaviour"]["train"]["hang"] = False
    (run_id,) = the_run(tmp_path, "id")
    again = tpu_trainer(tmp_path, "resume", run_id, "--rehearse", str(HANG), "--poll", "0.01")
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "is still READY and MaxText ended there: following it again in segment 1" in out
    calls = [" ".join(c) for c in read_state(state)["calls"]]
    assert not any("kill -TERM" in c for c in calls)  # nothing stopped, nothing started again
    assert len([c for c in calls if "setsid nohup" in c]) == 1
    assert len(_creates(tmp_path)) == 1  # the same VM
    assert the_run(tmp_path, "status") == ("succeeded",)
    assert segments(store_db(tmp_path), "n, cause, last_step") == [(1, None, 4)]
    log = (tmp_path / "store" / "runs" / run_id / "worker0.log").read_text(encoding="utf-8")
    assert re.findall(r"completed step: (\d+),", log) == ["0", "1", "2", "3", "4"]
    _nothing_left(tmp_path)
