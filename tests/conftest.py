"""Shared test helpers: fixture recipes, a fixed configuration, deterministic plans, fake tools."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.store.db import RunMode, RunStore


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """A test that runs a launcher in-process and interrupts it leaves Ctrl-C and SIGTERM
    ignored (an interrupted run's process ignores them until it exits): restore them, or
    every process a later test starts inherits the ignored Ctrl-C."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        if handler is not None:
            signal.signal(sig, handler)


TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
RECIPES_ROOT = FIXTURES / "recipes"
IRONWOOD = RECIPES_ROOT / "training" / "ironwood"
CONFIG = FIXTURES / "config.yaml"
GOLDEN = TESTS / "golden"
NOW = datetime(2026, 11, 22, 6, 0)

# One fixture recipe per variant family, relative to RECIPES_ROOT.
RECIPES = {
    "classic": "training/ironwood/tinyllama-8b/8k-bf16-tpu7x-2x2x1/xpk",
    "tee-upload": "training/ironwood/mixtral-moe/4k-fp8-tpu7x-4x4x4",
    "storage": "training/ironwood/densemodel-70b/4k-bf16-tpu7x-4x8x8-gcs/xpk",
    "maxdiffusion": "training/ironwood/video-14b/bf16-tpu7x-4x4x4/xpk",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite golden files from the current output"
    )


# Every test is exactly one kind of the test pyramid (pyproject.toml registers the markers).
KINDS = ("unit", "runtime", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Fail collection when a test is not exactly one of unit, runtime or e2e."""
    unmarked = [
        item.nodeid
        for item in items
        if len({mark.name for mark in item.iter_markers()} & set(KINDS)) != 1
    ]
    if unmarked:
        raise pytest.UsageError(
            "every test needs exactly one of the markers "
            + ", ".join(f"@pytest.mark.{kind}" for kind in KINDS)
            + " (unit: pure, no runtimes, seconds; runtime: needs a MaxText, Tunix, Hugging Face "
            "or Ray runtime; e2e: whole runs through the simulated cloud), as "
            "`pytestmark = pytest.mark.unit` at the top of the file or a decorator per test. "
            "These have none or several:\n  " + "\n  ".join(unmarked)
        )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@contextmanager
def at_recipes_root() -> Iterator[None]:
    """Work in the fixture recipes' root, where a fixture plan's relative paths point."""
    cwd = Path.cwd()
    os.chdir(RECIPES_ROOT)
    try:
        yield
    finally:
        os.chdir(cwd)


def plan_for(relative: str, **opts: object) -> Plan:
    """Plan a fixture recipe with the test configuration, a fixed user and a fixed clock."""
    with at_recipes_root():
        options = PlanOptions(user="test_user", now=NOW, **opts)  # type: ignore[arg-type]
        return plan_request(Request(relative, config_path=CONFIG), options)


def store_with_run(
    folder: Path,
    mode: RunMode = RunMode.REAL,
    launcher: LaunchPath = LaunchPath.XPK,
    device_type: str = "tpu7x-256",
) -> RunStore:
    """A run store in ``folder`` holding one bare run, ``r1`` (model ``m``)."""
    store = RunStore(folder / "runs.db", mode)
    new_run(store, "r1", launcher, device_type)
    return store


def check_golden(path: Path, text: str, update: bool) -> None:
    """Compare ``text`` with the golden file ``path`` (refresh with ``pytest --update-golden``)."""
    if update or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if not update:
            pytest.fail(f"golden file {path} was missing and has been written; run again")
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from its golden file; if the change is intended, "
        "run `pytest --update-golden`"
    )


def write_tool(bin_dir: Path, name: str, body: str) -> Path:
    """An executable stand-in for a command-line tool."""
    path = bin_dir / name
    path.write_text(body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return bin_dir


def cli_env(tmp_path: Path) -> dict[str, str]:
    """An environment for running tpu-trainer in a test: its own home, store and rehearsal
    folder, no configuration, and xpk's venv found as it is outside the test."""
    from tpu_trainer.infra.tool_env import cache_dir, xpk_python

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "TPU_TRAINER_CONFIG": "",
        "TPU_TRAINER_HOME": str(tmp_path / "store"),
        "TPU_TRAINER_REHEARSAL_DIR": str(tmp_path / "rehearsal"),
        "TPU_TRAINER_XPK_PYTHON": str(xpk_python()),
        "TPU_TRAINER_CACHE": str(cache_dir()),
        "COLUMNS": "200",
    }


def new_run(
    store: RunStore,
    run_id: str = "r1",
    launcher: LaunchPath = LaunchPath.XPK,
    device_type: str = "tpu7x-8",
    plan_json: dict[str, Any] | None = None,
    **fields: str | None,
) -> None:
    """A run in ``store``; what a test does not name is filled in (model ``m``, bf16, no
    project, cluster, region, zone or plan). ``fields`` overrides ``model``, ``project``..."""
    values: dict[str, str | None] = {
        "model": "m",
        "request": "r",
        "precision": "bf16",
        "project": None,
        "cluster": None,
        "region": None,
        "zone": None,
        **fields,
    }
    store.create_run(
        run_id,
        model=str(values["model"]),
        request=str(values["request"]),
        launcher=launcher,
        device_type=device_type,
        precision=str(values["precision"]),
        project=values["project"],
        cluster=values["cluster"],
        region=values["region"],
        zone=values["zone"],
        plan_json=plan_json,
    )


def run_commands(tmp_path: Path) -> list[list[str]]:
    """The commands a CLI test's run ran itself (its run store under ``tmp_path/store``), the
    tool as its bare name. The simulated cloud's call log holds the gcloud calls xpk made too."""
    import json
    import sqlite3

    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    try:
        rows = db.execute("SELECT argv FROM commands ORDER BY id").fetchall()
    finally:
        db.close()
    return [[Path(a[0]).name, *a[1:]] for a in (json.loads(r) for (r,) in rows) if a]


def submit_scripts(tmp_path: Path) -> list[str]:
    """The text of each submit script a CLI test's run ran (``bash submit_<model>.sh``)."""
    return [
        Path(c[1]).read_text(encoding="utf-8")
        for c in run_commands(tmp_path)
        if c[0] == "bash" and len(c) > 1
    ]
