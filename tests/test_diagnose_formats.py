"""``diagnose`` on the message formats of the tools it reads (Kueue's conditions, JobSet's
failure messages, MaxText's pyconfig checks, xpk's refusals), and the needle gate that lets a
scan skip the lines holding no known error."""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import signatures
from tpu_trainer.plan.diagnose import _Needles, diagnose
from tpu_trainer.plan.diagnose_score import load_corpus, predict
from tpu_trainer.plan.word_trie import trie_pattern as _trie

pytestmark = pytest.mark.unit

CORPUS = FIXTURES / "diagnose" / "corpus.yaml"


# Lines filled in from the tools' own message formats (names, sizes and counts vary).
FORMATS = [
    (
        "couldn't assign flavors to pod set main: insufficient unused quota for google.com/tpu "
        "in flavor v6e-256, 64 more needed",
        "kueue-admission",
    ),
    (
        "couldn't assign flavors to pod set workers: borrowing limit for cpu in flavor "
        "cpu-flavor exceeded",
        "kueue-admission",
    ),
    (
        "couldn't assign flavors to pod set head: resource memory unavailable in ClusterQueue",
        "kueue-admission",
    ),
    (
        "Workload didn't fit: request google.com/tpu resource error: [flavor v5p still lack 8 "
        "after borrowing]",
        "kueue-admission",
    ),
    ("LocalQueue team-queue doesn't exist", "kueue-admission"),
    ("jobset failed due to reaching max number of restarts", "jobset-webhook-crd"),
    (
        "jobset failed due to one or more job failures (first failed job: run-slice-job-1)",
        "jobset-webhook-crd",
    ),
    (
        "ValueError: Key per_device_batchsize was passed at the command line but isn't in config.",
        "training-config",
    ),
    (
        "ValueError: We received env `M_STEP` but it doesn't match a key, so it is assumed a mistake.",
        "training-config",
    ),
    (
        "ValueError: You are passing overrides by both CLI and ENV for `steps`. This isn't allowed.",
        "training-config",
    ),
    ("ValueError: Couldn't parse value from CLI or ENV 'ten' for key 'steps'", "training-config"),
    (
        "ValueError: Invalid model name was passed. Got llama9-1b, Valid options ('default',)",
        "training-config",
    ),
    ("AssertionError: grain_train_files can't be empty when dataset_type=grain", "training-config"),
    (
        "ValueError: Invalid max_target_length 512, this should be the sum of max_prefill",
        "training-config",
    ),
    (
        "[XPK] demo-run already exists, XPK will not create this workload. Please pick a new workload name",
        "xpk-validation",
    ),
    ("[XPK] Key zone-x is not an allowed xpk config key.", "xpk-validation"),
    ("[XPK] `--base-docker-image` and --docker-image can not be used together.", "xpk-validation"),
]


@pytest.mark.parametrize(("text", "family"), FORMATS, ids=[f for _, f in FORMATS])
def test_unit_tool_message_formats_land_in_their_family(text: str, family: str) -> None:
    assert predict(text) == family


@pytest.mark.parametrize(
    "text",
    [
        "[XPK] Exiting XPK cleanly",
        "[XPK] Task: `Check if Workload Already Exists` is implemented by the following command "
        "not running since it is a dry run.",
        "message: Quota reserved in ClusterQueue cluster-queue",
        "Warning  Restarting  jobset-controller  restarting jobset, attempt 1",
    ],
)
def test_unit_success_and_progress_lines_of_those_tools_match_nothing(text: str) -> None:
    assert diagnose([text]) == []


def _lines() -> list[str]:
    texts = [e.text for e in load_corpus(CORPUS)] + [t for t, _ in FORMATS]
    logs = [p.read_text(encoding="utf-8") for p in sorted((FIXTURES / "logs").glob("*.log"))]
    return [line.lower() for text in texts + logs for line in text.splitlines()]


def test_unit_the_needle_gate_finds_what_testing_every_needle_finds() -> None:
    needles = _Needles(signatures())
    for low in _lines():
        every = {i for needle, users in needles.users if needle in low for i in users}
        assert needles.find(low) == every, low


def test_unit_the_needle_expression_finds_words_that_begin_other_words() -> None:
    gate = re.compile(_trie(["quota", "quota for", "tpu", "tpus.", "xpk"]))
    assert gate.search("insufficient quota here")
    assert gate.search("see tpus.create")
    assert gate.search("[xpk] done")
    assert gate.search("a tpu") and not gate.search("a tp u")
    assert not gate.search("nothing to see")
