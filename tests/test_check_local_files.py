"""What a run writes on this machine is checked before capacity is asked for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import CONFIG, IRONWOOD, NOW
from tpu_trainer.app.files import write_generated
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.checks.local_files import check_local_files, is_writable
from tpu_trainer.checks.run import fast_findings
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.plan.plan import Level, Plan, PlanOptions
from tpu_trainer.plan.scripts import render_submit

CLASSIC = IRONWOOD / "tinyllama-8b" / "8k-bf16-tpu7x-2x2x1" / "xpk" / "run_recipe.sh"


def _tree(root: Path, model: str, text: str | None = None) -> Path:
    folder = root / model / "8k-bf16-tpu7x-2x2x1" / "xpk"
    folder.mkdir(parents=True)
    (folder / "run_recipe.sh").write_text(text or CLASSIC.read_text())
    return folder


def _plan(folder: Path) -> Plan:
    options = PlanOptions(user="test_user", now=NOW)
    return plan_request(Request(str(folder), config_path=CONFIG), options)


def _failed(plan: Plan) -> dict[str, str]:
    report = fast_findings(plan, fetch=False)
    return {f.name: f.message for f in report.failed}


@pytest.mark.unit
def test_a_dollar_in_xla_flags_fails_the_fast_checks_and_the_train_gate(tmp_path: Path) -> None:
    from tpu_trainer.cli.train_cmd import preflight_gate

    text = CLASSIC.read_text().replace("=65536", "=\\$LIMIT")
    plan = _plan(_tree(tmp_path, "flags", text))
    assert "xla-flags" in _failed(plan)
    with pytest.raises(TpuTrainerError, match="nothing was created"):
        preflight_gate(plan, "flags")
    with pytest.raises(InputError):  # what writing the scripts after provisioning met
        render_submit(plan)


@pytest.mark.unit
def test_a_250_character_model_folder_fails_before_anything_is_written(tmp_path: Path) -> None:
    plan = _plan(_tree(tmp_path, "m" * 250))
    failed = _failed(plan)
    assert "file-names" in failed
    assert "more than the file system's 255" in failed["file-names"]
    with pytest.raises(OSError, match="too long"):  # what the run would have met
        write_generated(plan.files[1], render_submit(plan))


@pytest.mark.unit
def test_a_short_folder_name_passes(tmp_path: Path) -> None:
    plan = _plan(_tree(tmp_path, "m" * 200))
    assert [f.name for f in check_local_files(plan)] == ["local-files"]
    write_generated(plan.files[1], render_submit(plan))


@pytest.mark.unit
def test_unwritable_folders_fail_with_the_folder_and_a_fix(tmp_path: Path) -> None:
    plan = _plan(_tree(tmp_path, "ro"))
    findings = check_local_files(plan, writable=lambda p: p != plan.model_dir)
    assert [(f.name, f.status) for f in findings] == [("writable-folders", Level.FAIL)]
    assert str(plan.model_dir) in findings[0].message
    assert "chmod u+w" in findings[0].fix


@pytest.mark.unit
def test_a_missing_folder_is_not_writable(tmp_path: Path) -> None:
    assert is_writable(tmp_path)
    assert not is_writable(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    assert not is_writable(tmp_path / "file")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another user can read (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tpu-trainer-ro-"))
    path.chmod(0o755)
    yield path
    for p in path.rglob("*"):
        p.chmod(0o755)
    shutil.rmtree(path)


@pytest.mark.e2e
def test_check_fails_for_a_read_only_recipe_folder_as_a_normal_user(shared_tmp: Path) -> None:
    from tpu_trainer.frameworks.maxtext.configs import configs_dir

    configs = shutil.copytree(configs_dir(), shared_tmp / "configs")
    folder = _tree(shared_tmp, "readonly")
    for p in [folder, folder.parent, folder.parent.parent]:
        p.chmod(0o555)
    home = shared_tmp / "home"
    home.mkdir()
    home.chmod(0o777)
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    proc = subprocess.run(
        (as_user if os.geteuid() == 0 else [])
        + [sys.executable, "-m", "tpu_trainer", "check", str(folder), "--fast", "--json"]
        + ["--config", str(CONFIG)],
        env={
            **os.environ,
            "HOME": str(home),
            "TPU_TRAINER_CONFIG": "",
            "TPU_TRAINER_MAXTEXT_CONFIGS": str(configs),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    checks = [c for c in json.loads(proc.stdout)["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in checks] == ["writable-folders", "writable-folders"]
