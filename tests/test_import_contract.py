"""The import contract in pyproject.toml ([tool.importlinter]) holds: packages import only the
layers below them, launch paths do not import each other, and no packages import each other in
a cycle. Each contract is checked with import-linter's ``lint-imports``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _lint_imports() -> Path:
    return Path(sys.executable).parent / "lint-imports"


def test_the_contract_is_declared_for_the_package() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)
    assert config["tool"]["importlinter"]["root_package"] == "tpu_trainer"
    kinds = {contract["type"] for contract in _contracts()}
    assert {"layers", "independence", "acyclic_siblings"} <= kinds


@pytest.mark.parametrize("contract", _contracts(), ids=lambda contract: contract["id"])
def test_the_import_contract_is_kept(contract: dict[str, Any]) -> None:
    assert _lint_imports().exists(), "import-linter is missing: bash scripts/setup.sh dev"
    done = subprocess.run(
        [str(_lint_imports()), "--no-cache", "--contract", contract["id"]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"the import contract {contract['name']!r} ({contract['id']}) is broken; "
        "these imports break it (lint-imports):\n" + done.stdout + done.stderr
    )
