"""`train --backend kuberay --ray-image IMAGE --rehearse SCENARIO` through the CLI: the real
kubectl against the Kubernetes API emulator, whose KubeRay controller makes the RayCluster's
pods, and whose port-forward tunnel reaches the fake Ray dashboard the rehearsal serves as the
head's dashboard port, playing the scenario's ``ray:`` job. A reclaimed slice resumes with
--auto-resume, or later with `resume RUN --rehearse`."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT
from kuberay_setup import kinds_left
from resume_checks import live_resources, segments, store_db, tpu_trainer

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
IMAGE = "us-docker.pkg.dev/demo-project/images/ray-maxtext:2.60.0"
CHECKPOINTS = (
    *("--set", "steps=50", "--set", "checkpoint_period=10"),
    *("--set", "enable_checkpointing=true"),
)


def _recipe(tmp_path: Path) -> Path:
    target = tmp_path / "recipes" / RECIPES["tee-upload"]
    if not target.exists():
        shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], target)
    return target


def _train(tmp_path: Path, scenario: Path, *args: str) -> tuple[int, str]:
    """``train`` the tpu7x-4x4x4 recipe on KubeRay in the rehearsal; its exit code and
    output."""
    proc = tpu_trainer(
        tmp_path, "train", str(_recipe(tmp_path)), "--backend", "kuberay", "--ray-image",
        IMAGE, "--rehearse", str(scenario), "--poll", "0.2", *args, timeout=300,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    return proc.returncode, out


def _run_id(tmp_path: Path) -> str:
    with sqlite3.connect(store_db(tmp_path)) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    return str(run_id)


def _nothing_left(tmp_path: Path) -> None:
    assert kinds_left(tmp_path / "rehearsal" / "state.json") == set()
    assert live_resources(store_db(tmp_path)) == []


def test_a_rehearsed_kuberay_run_makes_follows_reports_and_deletes_its_raycluster(
    tmp_path: Path,
) -> None:
    code, out = _train(tmp_path, SCENARIOS / "kuberay_rehearsal.yaml", "--set", "steps=12")
    run_id = _run_id(tmp_path)
    assert code == 0 and f"run {run_id}: succeeded" in out, out[-3000:]
    assert "(through kubectl port-forward)" in out
    assert f"submitted Ray job tpu-trainer-{run_id}" in out
    with sqlite3.connect(store_db(tmp_path)) as conn:
        steps = [s for (s,) in conn.execute("SELECT step FROM steps ORDER BY step")]
        kubectl = [a for (a,) in conn.execute("SELECT argv FROM commands") if '"kubectl"' in a]
        kinds = conn.execute("SELECT kind, state FROM resources ORDER BY kind").fetchall()
    assert steps == list(range(12))
    assert any("port-forward" in argv for argv in kubectl)
    assert kinds == [("configmap", "deleted"), ("raycluster", "deleted")]
    run_dir = tmp_path / "store" / "runs" / run_id
    assert f"tpu-trainer run {run_id}" in (run_dir / "README.md").read_text(encoding="utf-8")
    assert IMAGE in (run_dir / "raycluster.yaml").read_text(encoding="utf-8")
    _nothing_left(tmp_path)


def test_a_rehearsed_reclaimed_slice_resumes_on_a_new_raycluster_with_auto_resume(
    tmp_path: Path,
) -> None:
    scenario = SCENARIOS / "kuberay_rehearsal_preempted.yaml"
    code, out = _train(tmp_path, scenario, *CHECKPOINTS, "--auto-resume", "2")
    run_id = _run_id(tmp_path)
    assert code == 0 and f"run {run_id}: succeeded" in out, out[-3000:]
    assert f"submitted Ray job tpu-trainer-{run_id}-2" in out
    assert segments(store_db(tmp_path)) == [
        (1, "preempted", 30, 30, None, None),
        (2, None, 49, 40, 30, 0),
    ]
    _nothing_left(tmp_path)


def test_a_rehearsed_interrupted_kuberay_run_is_carried_on_by_resume(tmp_path: Path) -> None:
    scenario = SCENARIOS / "kuberay_rehearsal_preempted.yaml"
    code, out = _train(tmp_path, scenario, *CHECKPOINTS)
    assert code != 0, out[-3000:]
    assert "interrupted at step 30 of 50 (preempted: TPU worker pod" in out, out[-3000:]
    run_id = _run_id(tmp_path)
    _nothing_left(tmp_path)
    proc = tpu_trainer(
        tmp_path, "resume", run_id, "--rehearse", str(scenario), "--poll", "0.2", timeout=300
    )
    resumed = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in resumed, resumed[-3000:]
    assert f"run {run_id}: succeeded" in resumed
    assert "the next segment runs on a RayCluster made again" in resumed
    assert segments(store_db(tmp_path), "n, cause, last_step, restored_step") == [
        (1, "preempted", 30, None),
        (2, None, 49, 30),
    ]
    _nothing_left(tmp_path)


@pytest.mark.parametrize(
    ("ray", "said"),
    [
        ({"ends": "vanished"}, "ray.ends: 'vanished' is not one of succeeded, failed, preempted"),
        ({"ends": "preempted"}, "ray.after_step: `ends: preempted` needs the step"),
        ({"after_step": 3}, "ray.after_step: only with `ends: preempted`"),
        ({"head_redy": False}, "ray.head_redy: unknown key (known: ends, after_step"),
    ],
)
def test_a_bad_ray_scenario_is_refused_before_anything_runs(
    tmp_path: Path, ray: dict[str, object], said: str
) -> None:
    data = yaml.safe_load((SCENARIOS / "kuberay_rehearsal.yaml").read_text(encoding="utf-8"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**data, "ray": ray}), encoding="utf-8")
    proc = tpu_trainer(
        tmp_path, "train", str(_recipe(tmp_path)), "--backend", "kuberay", "--ray-image",
        IMAGE, "--rehearse", str(bad), timeout=120,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert said in " ".join(out.split()), out[-3000:]
    assert not store_db(tmp_path).exists() or live_resources(store_db(tmp_path)) == []
