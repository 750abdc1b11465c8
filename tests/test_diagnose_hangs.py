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
