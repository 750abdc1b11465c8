"""A GKE run that fails with an error no signature knows: after the run, the family classifier
reads the log the run kept, and the run's error (the store, ``show RUN``, the last line of
``train``) names the family, marked as read from the wording, with its cause and fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT
from resume_checks import live_resources, shown_run, store_db, the_run, tpu_trainer

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "unknown_failure.yaml"
FAMILY = "Authentication and permissions (by its wording, confidence 0."


def test_a_gke_failure_only_the_classifier_knows_is_explained_in_the_runs_error(
    tmp_path: Path,
) -> None:
    recipe = tmp_path / "recipes" / "run"
    shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], recipe)
    rehearse = ("--rehearse", str(SCENARIO), "--poll", "0.05", "--wait-timeout", "120")
    proc = tpu_trainer(tmp_path, "train", str(recipe), *rehearse)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]

    run_id, status, error = the_run(tmp_path, "id, status, error")
    assert status == "failed"
    assert FAMILY in error and "line 6 of worker0.log" in error
    assert "RefreshError: ('invalid_grant" in error  # the family's fix quotes the line
    assert "gcloud auth application-default login" in error
    assert "no known error in the run's logs" in out
    assert shown_run(tmp_path, run_id)["error"] == error
    shown = tpu_trainer(tmp_path, "show", run_id, timeout=60, check=True).stdout
    assert "(by its wording" in shown
    assert live_resources(store_db(tmp_path)) == []
