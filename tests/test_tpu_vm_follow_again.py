"""`resume RUN` for a TPU VM run whose process was killed while its program still ran on a
READY VM: the program runs on, detached from the ssh session, and `resume` follows it again in
the same segment, from the first line of its log on the workers, passing over the lines the run
already holds (fake cloud, crash rehearsal: the tool killed once worker 0's log holds a step)."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT, cli_env
from resume_checks import live_resources, segments, store_db, the_run
from tpu_trainer.fakecloud import maxtext_log as mlog
from tpu_trainer.fakecloud.crash import STEP, Case, Rehearsal, crash, initial
from tpu_trainer.fakecloud.state import read_state, transaction

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tpu_vm"
STEPS = 30


def _scenario(folder: Path, *, exit_code: int = 0) -> Path:
    """A v6e-8 TPU VM whose MaxText program prints steps 0..29, a line every 30 s of the
    scenario's clock (which the run's hang watchdog moves on): it is still running on the
    workers when the run's process is killed at its first step."""
    base = (FIXTURES / "maxtext_steps.log").read_text(encoding="utf-8")  # steps 0..4
    (folder / "steps.log").write_text(base + mlog.step_lines(5, STEPS - 1), encoding="utf-8")
    scenario = {
        "project": "demo-project",
        "region": "us-central1",
        "tpu_vm": {
            "zones": ["us-central1-ai1a"],
            "creating_polls": 0,
            "train": {
                "log_file": "steps.log",
                "other_workers_log_file": "steps.log",  # every worker prints its steps
                "line_seconds": 30,
                "exit_code": exit_code,
            },
        },
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return path


def _rehearsal(tmp_path: Path, scenario: Path) -> Rehearsal:
    """The tinyllama recipe on a v6e-8 TPU VM (two workers), 30 steps."""
    recipe = tmp_path / "recipes" / "tinyllama-8b" / "8k-bf16-v6e-2x4" / "xpk"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], recipe)
    script = recipe / "run_recipe.sh"
    script.write_text(
        script.read_text().replace("--device-type=tpu7x-2x2x1", "--device-type=v6e-2x4")
    )
    extra = ("--backend", "tpu-vm", "--set", f"steps={STEPS}")
    config = tmp_path / "config.yaml"
    # the hang watchdog moves the scenario's clock on many times faster than real time, so a
    # line read a few real tenths of a second after the program printed it would look late
    config.write_text("watchdog_k: 1000\n", encoding="utf-8")
    env = {**cli_env(tmp_path), "TPU_TRAINER_CONFIG": str(config)}
    return Rehearsal(tmp_path, recipe, scenario, env, timeout_s=300, train_args=extra)


def _killed_at_a_step(tmp_path: Path, *, exit_code: int = 0) -> tuple[Rehearsal, str]:
    """Train, and kill the tool (SIGKILL) once worker 0's log holds a step; the run's id."""
    reh = _rehearsal(tmp_path, _scenario(tmp_path, exit_code=exit_code))
    killed = crash(reh, Case("SIGKILL", STEP), initial(reh.scenario))
    assert killed.train_code == -9, killed.output[-3000:]
    (run_id,) = the_run(tmp_path, "id")
    return reh, run_id


def _resume(reh: Rehearsal, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        reh.tool("resume", run_id, "--rehearse", str(reh.scenario), "--poll", "0.01"),
        env=reh.env,
        capture_output=True,
        text=True,
        timeout=reh.timeout_s,
        check=False,
    )


def _calls(tmp_path: Path) -> list[str]:
    return [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]


def test_resume_follows_again_the_program_a_killed_run_left_running_and_keeps_each_step_once(
    tmp_path: Path,
) -> None:
    reh, run_id = _killed_at_a_step(tmp_path)
    log = tmp_path / "store" / "runs" / run_id / "worker0.log"
    held = re.findall(r"completed step: (\d+),", log.read_text(encoding="utf-8"))
    assert 0 < len(held) < STEPS  # killed mid-run: the program had more to print

    again = _resume(reh, run_id)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "is still READY and MaxText" in out and "following it again in segment 1" in out
    assert the_run(tmp_path, "status, error") == ("succeeded", None)
    assert segments(store_db(tmp_path), "n, cause, last_step") == [(1, None, STEPS - 1)]
    text = log.read_text(encoding="utf-8")
    assert re.findall(r"completed step: (\d+),", text) == [str(n) for n in range(STEPS)]
    assert len(text.splitlines()) == len(set(text.splitlines()))  # no line twice
    with sqlite3.connect(store_db(tmp_path)) as db:
        stored = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY step")]
    assert stored == list(range(STEPS))
    calls = _calls(tmp_path)
    assert len([c for c in calls if "setsid nohup" in c]) == 1  # started once, never again
    assert len([c for c in calls if "tail -n +1" in c and "setsid" not in c]) == 1  # attached
    assert not any("kill -TERM" in c for c in calls)  # nothing was stopped
    assert len([c for c in calls if "tpu-vm create" in c]) == 1  # on the same VM
    assert read_state(reh.state)["tpu_vm"]["nodes"] == {}
    assert live_resources(store_db(tmp_path)) == []


def test_resume_takes_the_exit_status_of_a_program_that_failed_after_its_run_was_killed(
    tmp_path: Path,
) -> None:
    reh, run_id = _killed_at_a_step(tmp_path, exit_code=3)
    again = _resume(reh, run_id)
    out = again.stdout + again.stderr
    assert again.returncode != 0, out[-4000:]
    assert "following it again in segment 1" in out
    status, error = the_run(tmp_path, "status, error")
    assert status == "failed" and error.startswith("training failed on worker 0 (exit 3)"), error
    assert segments(store_db(tmp_path), "n, cause") == [(1, "failed")]
    assert read_state(reh.state)["tpu_vm"]["nodes"] == {}


def test_a_program_the_open_segment_did_not_start_is_stopped_and_a_new_segment_runs(
    tmp_path: Path,
) -> None:
    reh, run_id = _killed_at_a_step(tmp_path)
    with transaction(reh.state) as cloud:  # what runs there says another segment started it
        (node,) = cloud["tpu_vm"]["nodes"].values()
        node["program"]["segment"] = 7
    again = _resume(reh, run_id)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "still runs on" in out and "outside any open segment of the run: stopping it" in out
    calls = _calls(tmp_path)
    stop = next(i for i, c in enumerate(calls) if "kill -TERM" in c)
    starts = [i for i, c in enumerate(calls) if "setsid nohup" in c]
    assert len(starts) == 2 and starts[0] < stop < starts[1]  # stopped before the next start
    assert len([c for c in calls if "tpu-vm create" in c]) == 1  # on the same VM
    rows = segments(store_db(tmp_path), "n, cause, last_step")
    assert [r[:2] for r in rows] == [(1, "crashed"), (2, None)] and rows[1][2] == STEPS - 1
    assert the_run(tmp_path, "status") == ("succeeded",)


def test_a_killed_run_whose_vm_was_preempted_runs_a_new_segment_on_a_vm_made_again(
    tmp_path: Path,
) -> None:
    reh, run_id = _killed_at_a_step(tmp_path)
    with transaction(reh.state) as cloud:  # the capacity is taken back while no one follows
        (node,) = cloud["tpu_vm"]["nodes"].values()
        node["state"] = "PREEMPTED"
    again = _resume(reh, run_id)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "is PREEMPTED: it is deleted and made again" in out
    assert "following it again" not in out
    calls = _calls(tmp_path)
    assert len([c for c in calls if "tpu-vm create" in c]) == 2
    assert len([c for c in calls if "setsid nohup" in c]) == 2  # started again on the new VM
    rows = segments(store_db(tmp_path), "n, cause, last_step")
    assert [r[:2] for r in rows] == [(1, "crashed"), (2, None)] and rows[1][2] == STEPS - 1
    assert the_run(tmp_path, "status") == ("succeeded",)
    assert read_state(reh.state)["tpu_vm"]["nodes"] == {}
