"""``diagnose`` on the logs of hung runs: a MegaScale hang with its digest, a barrier that timed
out, missing heartbeats; each named as the hang it is, and fatal (a followed run stops)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.plan.diagnose import diagnose, has_fatal

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "diagnose"


def test_a_megascale_hang_log_is_diagnosed_as_a_megascale_hang_first() -> None:
    lines = (FIXTURES / "megascale_hang.log").read_text(encoding="utf-8").splitlines()
    matches = diagnose(lines)
    assert has_fatal(matches)
    first = matches[0]
    assert first.signature == "megascale-hang-detected"
    assert first.family == "multislice-barrier"
    assert first.line == 3
    assert dict(first.extracted) == {"graphs": "4", "launch": "13650"}
    found = {m.signature for m in matches}
    assert "megascale-hang-detected" in found
    assert found & {"jax-barrier-timeout", "coordinator-unreachable"}


@pytest.mark.parametrize(
    ("line", "signature"),
    [
        (
            "jax.errors.JaxRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Id: "
            "PjRT_Client_Connect::Barrier",
            "jax-barrier-timeout",
        ),
        (
            "E1124 06:00:09.000000 140117 megascale_client.cc:210] DEADLINE_EXCEEDED: no "
            "heartbeat from slice 1 for 300s",
            "megascale-deadline",
        ),
        (
            "E1124 TopologyCoordinator: Unable to wait for all slices to connect",
            "megascale-slices-not-connected",
        ),
    ],
)
def test_hang_texts_are_named_and_fatal(line: str, signature: str) -> None:
    matches = diagnose([line])
    assert matches and matches[0].signature == signature
    assert matches[0].severity == "fatal"


@pytest.mark.parametrize(
    ("line", "signature", "extracted"),
    [
        (  # AXLearn's trainer watchdog (axlearn/common/trainer.py)
            "I1124 06:40:00.000000 139872 trainer.py:430] Watchdog triggered because step has "
            "not incremented in the last 1800.0 seconds.",
            "trainer-progress-watchdog",
            {"seconds": "1800.0"},
        ),
        (
            "E1124 07:10:00.000000 139872 trainer.py:455] Exit due to no progress during training.",
            "trainer-progress-watchdog",
            {},
        ),
        (  # AXLearn's slice health check on GKE (axlearn/cloud/gcp/tpu_health_check.py)
            "E1124 05:58:10.000000 139872 tpu_health_check.py:96] Slice 2-3 health check failed "
            "due to timeout.",
            "tpu-slice-health-check",
            {"slice": "2-3", "reason": "timeout"},
        ),
        (
            "E1124 05:59:00.000000 139872 tpu_health_check.py:214] Multi-slice (global) health "
            "check failed due to program error!",
            "tpu-slice-health-check",
            {"reason": "program error"},
        ),
    ],
)
def test_a_trainer_watchdog_and_a_failed_slice_health_check_are_named_and_fatal(
    line: str, signature: str, extracted: dict[str, str]
) -> None:
    matches = diagnose([line])
    assert matches and matches[0].signature == signature
    assert matches[0].severity == "fatal"
    assert dict(matches[0].extracted) == extracted


def test_a_passed_health_check_and_the_watchdog_s_own_loop_lines_are_not_errors() -> None:
    quiet = [
        "I1124 05:58:00.000000 139872 tpu_health_check.py:90] Slice 0 health check passed in "
        "41.2s!",
        "I1124 05:58:00.000000 139872 tpu_health_check.py:60] Skipping single slice health "
        "check because check spec is global=180.",
        "I1124 06:10:00.000000 139872 trainer.py:470] Watchdog loop done",
    ]
    assert not has_fatal(diagnose(quiet))
