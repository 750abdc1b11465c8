"""Reading failed creates: gcloud's real texts (recorded), the older texts still met, and what
the provisioning does next for each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.infra.gcloud_errors import FIXES, XpkFailure, classify
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.gke.capacity import MOVE_ON, Outcome
from tpu_trainer.launchers.gke.pool_delete import create_in_progress

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).parent / "fixtures" / "gcloud_errors" / "node_pool_create.yaml"


def _result(stderr: str, stdout: str = "") -> CommandResult:
    return CommandResult(("gcloud",), 1, stdout, stderr, 0.0)


def _recorded() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))["cases"]
    return cases


@pytest.mark.parametrize("case", _recorded(), ids=lambda c: str(c["name"]))
def test_real_gcloud_texts_are_classified(case: dict[str, Any]) -> None:
    assert classify(_result(case["stderr"])) is XpkFailure(case["class"])


def test_the_recording_covers_every_failure_the_provisioning_reads() -> None:
    assert {XpkFailure(c["class"]) for c in _recorded()} == set(XpkFailure) - {XpkFailure.OTHER}


OLD_OPERATION = (
    "ERROR: (gcloud.beta.container.node-pools.create) Operation [<Operation\n"
    " clusterConditions: [<StatusCondition\n"
    " canonicalCode: CanonicalCodeValueValuesEnum(RESOURCE_EXHAUSTED, 8)\n"
    " message: 'Google Compute Engine: Requested resource is exhausted: RESOURCE_EXHAUSTED: not "
    "enough resources available in reservation'>]\n"
    " status: StatusValueValuesEnum(DONE, 3)\n"
    " zone: 'us-central1'>] finished with error: Google Compute Engine: Requested resource is "
    "exhausted\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (OLD_OPERATION, XpkFailure.CAPACITY),
        ("[XPK] No available resources in reservation r", XpkFailure.CAPACITY),
        (
            "ERROR: ... ResponseError: code=409, message=Already exists: x/nodePools/np.",
            XpkFailure.ALREADY_EXISTS,
        ),
        (
            "ERROR: ... code=400, message=Operation operation-1 is currently creating node pool "
            "np. Please wait and try again once it is done.",
            XpkFailure.BUSY,
        ),
        (
            "ERROR: ... ResponseError: code=404, message=Not found: projects/p/locations/"
            "us-central1/clusters/c/nodePools/np.",
            XpkFailure.OTHER,
        ),
        (
            "ERROR: ... ResponseError: code=429, message=Quota exceeded for quota metric "
            "'Mutate requests' and limit 'Mutate requests per minute'",
            XpkFailure.OTHER,
        ),
        ("ERROR: ... code=400, message=Invalid machine type", XpkFailure.OTHER),
    ],
)
def test_older_and_neighbouring_texts(text: str, expected: XpkFailure) -> None:
    assert classify(_result(text)) is expected


def test_capacity_and_zone_failures_move_on_the_ones_that_end_the_run_say_what_to_do() -> None:
    assert MOVE_ON == {
        XpkFailure.CAPACITY: Outcome.EXHAUSTED,
        XpkFailure.WRONG_ZONE: Outcome.WRONG_ZONE,
    }
    assert "gcloud container operations list" in FIXES[XpkFailure.BUSY]
    assert "cluster_name" in FIXES[XpkFailure.CLUSTER_MISSING]


def test_a_pool_delete_waits_only_while_gke_says_an_operation_runs() -> None:
    busy = [c for c in _recorded() if c["class"] == "busy"]
    assert busy and all(create_in_progress(_result(c["stderr"])) for c in busy)
    assert not create_in_progress(_result("ERROR: ... code=403, message=Permission denied"))
