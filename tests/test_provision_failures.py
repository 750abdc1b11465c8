"""What provisioning does with what gcloud answers: DEGRADED health skipped with its blocks,
the 429 of a too-small reservation moves on like exhaustion, a busy or missing cluster stops
with what to do. gcloud's answers are the recorded real texts, played by a scripted runner."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CONFIG
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.config.load import read_config
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.gcloud_errors import FIXES, XpkFailure
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandFailed, CommandResult
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.capacity import Choice, Survey, Verdict
from tpu_trainer.launchers.gke.node_pools import CapacityError
from tpu_trainer.launchers.gke.provision import Provisioner
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.unit

RECORDED = Path(__file__).parent / "fixtures" / "gcloud_errors" / "node_pool_create.yaml"
NOT_FOUND = (
    "ERROR: (gcloud.container.node-pools.describe) ResponseError: code=404, message=Not found"
)


def _recorded(failure: XpkFailure) -> str:
    cases = yaml.safe_load(RECORDED.read_text(encoding="utf-8"))["cases"]
    return str(next(c["stderr"] for c in cases if c["class"] == failure.value))


def _reservation(name: str, zone: str, health: str, blocks: int, in_use: int) -> dict[str, Any]:
    return {
        "name": name,
        "zone": f"https://www.googleapis.com/compute/beta/projects/demo-project/zones/{zone}",
        "status": "READY",
        "aggregateReservation": {"hostCount": 8, "inUseHostCount": in_use},
        "resourceStatus": {"healthInfo": {"healthStatus": health, "degradedBlockCount": blocks}},
    }


class Scripted:
    """Answers each gcloud call by its verb; remembers every argv."""

    def __init__(self, create_stderr: str = "") -> None:
        self.create_stderr = create_stderr
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **_options: object) -> CommandResult:
        self.argvs.append(list(argv))
        words = " ".join(argv)
        if "reservations list" in words:  # both reservations in one answer
            sick = _reservation("demo-reservation-a", "us-central1-ai1a", "DEGRADED", 2, 0)
            full = _reservation("demo-reservation-b", "us-central1-c", "HEALTHY", 0, 8)
            other = _reservation("demo-reservation-b", "us-central1-b", "HEALTHY", 0, 0)
            return CommandResult(tuple(argv), 0, json.dumps([other, sick, full]), "", 0.0)
        if "node-pools create" in words:
            return CommandResult(tuple(argv), 1, "", self.create_stderr, 0.0)
        return CommandResult(tuple(argv), 1, "", NOT_FOUND, 0.0)


def _provisioner(tmp_path: Path, runner: Scripted) -> Provisioner:
    store = RunStore(tmp_path / "runs.db")
    store.create_run(
        "0a0a0a0a", model="m", request="r", launcher=LaunchPath.XPK, device_type="tpu7x-2x2x1",
        precision="bf16", project="demo-project", cluster="demo-cluster", region="us-central1",
        zone="us-central1-ai1a", plan_json=None,
    )  # fmt: skip
    return Provisioner(
        Gcloud(runner, "demo-project"), Xpk(runner), Kubectl(runner), store, "0a0a0a0a",
        read_config(CONFIG), Slice.parse("tpu7x-2x2x1"), 1, SilentDisplay(),
    )  # fmt: skip


def test_a_degraded_reservation_is_skipped_with_its_blocks_and_a_full_one_too(
    tmp_path: Path,
) -> None:
    prov = _provisioner(tmp_path, Scripted())
    with pytest.raises(CapacityError) as failed:
        prov._create([], "1.34.1-gke.1829001")
    assert [(a.reservation, a.status, a.outcome, a.message) for a in prov.attempts] == [
        ("demo-reservation-a", "READY", Verdict.DEGRADED.value, "(2 degraded blocks)"),
        ("demo-reservation-b", "READY", Verdict.TOO_SMALL.value, ""),
    ]
    assert (
        "demo-reservation-a (us-central1-ai1a): skip: reservation DEGRADED (maintenance in "
        "progress) (2 degraded blocks)" in failed.value.message
    )
    shown = prov.display.messages  # type: ignore[attr-defined]
    assert any("demo-reservation-a (us-central1-ai1a, READY, DEGRADED" in m for m in shown)
    # one question for every reservation; demo-reservation-b is the one in its configured zone
    asked = [a for a in prov.gcloud.runner.argvs if "reservations" in a]  # type: ignore[attr-defined]
    assert len(asked) == 1 and "--filter=name=(demo-reservation-a demo-reservation-b)" in asked[0]


def _choice() -> Choice:
    return Choice(Survey("demo-reservation-b", "us-central1-c", "READY", 8), Verdict.TRY)


def test_the_429_of_a_too_small_reservation_moves_on_like_exhaustion(tmp_path: Path) -> None:
    runner = Scripted(_recorded_429())
    prov = _provisioner(tmp_path, runner)
    assert prov._gcloud_create(_choice(), "us-central1-c", "1.34.1-gke.1829001") is None
    (attempt,) = prov.attempts
    assert attempt.outcome == "exhausted"
    assert "code=429" in attempt.message and "is insufficient for node pool" in attempt.message
    verbs = [next(w for w in a if w in ("create", "describe")) for a in runner.argvs]
    assert verbs == ["create", "describe"]  # the pool is looked for, then the next is tried


def _recorded_429() -> str:
    cases = yaml.safe_load(RECORDED.read_text(encoding="utf-8"))["cases"]
    return str(next(c["stderr"] for c in cases if "code=429" in c["stderr"]))


@pytest.mark.parametrize("failure", [XpkFailure.BUSY, XpkFailure.CLUSTER_MISSING])
def test_a_busy_or_missing_cluster_stops_with_what_to_do(
    tmp_path: Path, failure: XpkFailure
) -> None:
    prov = _provisioner(tmp_path, Scripted(_recorded(failure)))
    with pytest.raises(CommandFailed) as failed:
        prov._gcloud_create(_choice(), "us-central1-c", "1.34.1-gke.1829001")
    assert failed.value.fix == FIXES[failure]
    assert [a.outcome for a in prov.attempts] == ["failed"]
