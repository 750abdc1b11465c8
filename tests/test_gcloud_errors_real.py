"""What the real gcloud prints when a node pool create fails, and how the tool reads it.

Each case runs the installed gcloud against the emulated GKE API (simcloud), classifies its
answer and writes it to ``tests/fixtures/gcloud_errors/node_pool_create.yaml`` (compared like a
golden file; ``pytest --update-golden`` rewrites it), which the unit tests of
``test_gcloud_errors.py`` read without gcloud.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conftest import check_golden
from tpu_trainer.infra.gcloud_errors import XpkFailure, classify
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.simcloud.local import serve
from tpu_trainer.simcloud.state_gke import CreateFailure, PoolPlan, StateGke

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).parent / "fixtures" / "gcloud_errors" / "node_pool_create.yaml"
STOCKOUT = (
    "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to "
    "fulfill the request.  Try a different zone, or try again later."
)
INSUFFICIENT = (
    'Reservation does not have enough resources for the request: specific reservation "res-a" '
    'is insufficient for node pool "short" at zone "us-central1-a": required 16 and short of 8 '
    "VM count of machine type tpu7x-standard-4t."
)
FAILURES = {
    "stock": CreateFailure("RESOURCE_EXHAUSTED", STOCKOUT, condition_code="GCE_STOCKOUT"),
    "incorrect": CreateFailure(
        "INVALID_ARGUMENT",
        "Google Compute Engine: Reservation is incorrect for the requested resources.",
    ),
    "short": CreateFailure("RESOURCE_EXHAUSTED", INSUFFICIENT, http_code=429),
    "zone": CreateFailure(
        "NOT_FOUND",
        'Google Compute Engine: reservation "res-b" not found for node pool "zone" at zone '
        '"us-central1-a".',
        http_code=404,
    ),
}


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    expected: XpkFailure
    setup: tuple[str, ...] = ()


POOL = ("--cluster=c", "--region=us-central1")
CREATE = ("beta", "container", "node-pools", "create")
MACHINE = ("--machine-type=tpu7x-standard-4t", "--num-nodes=16")
POLICY = "tpu7x-128-4x4x4-placement-policy"
MADE = (*POOL, *MACHINE, f"--placement-policy={POLICY}")  # a create GKE accepts
CASES = [
    Case("stockout in the operation", (*CREATE, "stock", *POOL, *MACHINE), XpkFailure.CAPACITY),
    Case(
        "reservation incorrect for the requested resources",
        (*CREATE, "incorrect", *POOL, *MACHINE),
        XpkFailure.WRONG_ZONE,
    ),
    Case(
        "specific reservation too small (429)",
        (*CREATE, "short", *POOL, *MACHINE),
        XpkFailure.CAPACITY,
    ),
    Case(
        "reservation not in the pool's zone (404)",
        (*CREATE, "zone", *POOL, *MACHINE),
        XpkFailure.WRONG_ZONE,
    ),
    Case(
        "name in use (409)",
        (*CREATE, "taken", *POOL, *MACHINE),
        XpkFailure.ALREADY_EXISTS,
        setup=(*CREATE, "taken", *MADE),
    ),
    Case(
        "delete while the create runs (400)",
        ("container", "node-pools", "delete", "slow", *POOL, "--quiet"),
        XpkFailure.BUSY,
        setup=(*CREATE, "slow", *MADE, "--async"),
    ),
    Case(
        "create in a missing cluster (404)",
        (*CREATE, "np", "--cluster=nope", "--region=us-central1", *MACHINE),
        XpkFailure.CLUSTER_MISSING,
    ),
    Case(
        "describe a missing cluster (404, second line)",
        ("container", "clusters", "describe", "nope", "--region=us-central1"),
        XpkFailure.CLUSTER_MISSING,
    ),
]


SCRIPTED = {
    **{name: PoolPlan(failure=failure) for name, failure in FAILURES.items()},
    "slow": PoolPlan(create_seconds=600),  # runs past every call the cases make
}


def _gke(state: Path) -> list[StateGke]:
    return [StateGke(state, scripted=SCRIPTED)]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[CommandResult]]:
    scenario = {
        "project": "p",
        "region": "us-central1",
        "cluster": {"name": "c"},
        "resource_policies": [POLICY],
    }
    folder = tmp_path_factory.mktemp("gcloud")
    with serve(scenario, folder, _gke) as cloud:
        out = []
        for case in CASES:
            if case.setup:
                assert _gcloud(cloud.env, case.setup).returncode == 0
            proc = _gcloud(cloud.env, case.argv)
            text = _normalise(proc.stderr, cloud.emulator.base_url, folder / "gcloud-config")
            out.append(CommandResult(("gcloud", *case.argv), proc.returncode, "", text, 0.0))
        yield out
    assert cloud.emulator.invalid() == []


def _gcloud(env: dict[str, str], argv: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcloud", *argv, "--project=p"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _normalise(text: str, base_url: str, config: Path) -> str:
    """The run's port and private configuration folder, made stable."""
    text = text.replace(base_url, "http://127.0.0.1:<port>").replace(str(config), "<config>")
    return re.sub(r"[ \t]+$", "", text, flags=re.MULTILINE)


class _Literal(yaml.SafeDumper):
    """gcloud's texts as they print: multi-line strings in block style."""


_Literal.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    ),
)


def test_each_real_gcloud_failure_is_classified(answers: list[CommandResult]) -> None:
    got = [(c.name, r.code, classify(r)) for c, r in zip(CASES, answers, strict=True)]
    assert got == [(c.name, 1, c.expected) for c in CASES]


def test_the_real_texts_are_the_recorded_fixture(
    answers: list[CommandResult], update_golden: bool
) -> None:
    cases = [
        {
            "name": c.name,
            "command": " ".join(("gcloud", *c.argv, "--project=p")),
            "exit": r.code,
            "class": c.expected.value,
            "stderr": r.stderr,
        }
        for c, r in zip(CASES, answers, strict=True)
    ]
    header = (
        "# What the real gcloud prints when a node pool create (or a delete, describe) fails,\n"
        "# run against the emulated GKE API; written by\n"
        "#   pytest tests/test_gcloud_errors_real.py --update-golden\n"
    )
    text = header + yaml.dump({"cases": cases}, Dumper=_Literal, sort_keys=False, width=1000)
    check_golden(FIXTURE, text, update_golden)


def test_the_operation_error_carries_gclouds_own_enum_number(answers: list[CommandResult]) -> None:
    stockout = answers[0].stderr
    assert "canonicalCode: CanonicalCodeValueValuesEnum(RESOURCE_EXHAUSTED, 9)" in stockout
    assert "code: CodeValueValuesEnum(GCE_STOCKOUT, 1)" in stockout
    assert f'message: "{STOCKOUT}"' in stockout  # a message with ' in it is quoted with "
    assert stockout.rstrip().endswith(f"finished with error: {STOCKOUT}")
    assert f"ResponseError: code=429, message={INSUFFICIENT}" in answers[2].stderr
