"""The family classifier of ``diagnose``: lines no signature knows are put in their family by
their wording (``<family>-classified``), never fatal, and near-misses stay unmatched.

The shipped model (catalog/error_classifier.json) must be what tools/build_diagnose_classifier.py
builds from the corpus and the service formats; how well it generalises is measured out of
sample by ``bench/diagnose_corpus.py --cross-validate`` (figures in bench/RESULTS.md)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import CatalogError, catalog, load_catalog
from tpu_trainer.plan.diagnose import LiveScanner, diagnose, matches_to_json
from tpu_trainer.plan.diagnose_classify import (
    MODEL_FILE,
    NONE,
    QUIET_THRESHOLD,
    WHOLE_LINES,
    Classifier,
    Model,
    best_verdict,
    features,
    packaged,
    quiet_text,
    reads_as_error,
    train,
    training_examples,
)
from tpu_trainer.plan.diagnose_score import load_corpus, load_service_formats

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "build_diagnose_classifier.py"
CORPUS = FIXTURES / "diagnose" / "corpus.yaml"
FORMATS = FIXTURES / "diagnose" / "service_formats.yaml"

# Lines in wordings no signature of the catalog matches (other layers' wrappings of a known
# failure): the classifier alone puts them in their family. Each is well inside its family for
# any order of the training examples (the quota line: 0.77 to 0.84 over four shuffles), so a
# change to the corpus does not move it across the threshold.
UNSEEN_WORDINGS = [
    (
        "quota",
        "TPU request refused: the project has used its whole TPUS_PER_TPU_FAMILY quota in region "
        "us-east5 (limit 64)",
    ),
    (
        "auth-permissions",
        "google.auth.exceptions.RefreshError: ('invalid_grant: Token has been expired or "
        "revoked.', {'error': 'invalid_grant'})",
    ),
    ("capacity-reservation", "Error: the reservation ran short of capacity for this request"),
]

# Messages filled in from the services' formats with other names and numbers, some wrapped by
# a client library: the classifier alone (no signature) puts each in its family.
FORMAT_FILLED = [
    *UNSEEN_WORDINGS,
    (
        "image-entrypoint",
        "Error: ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "
        '"us-docker.pkg.dev/proj/repo/trainer:2026-11-20": not found',
    ),
    (
        "out-of-memory",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
        "Attempting to allocate 12.25G. That was not possible. There are 3.10G free.",
    ),
    (
        "storage-mount",
        'MountVolume.SetUp failed for volume "gcs-ckpt" : rpc error: code = Internal desc = '
        "gcsfuse failed with error: mount point /var/lib/kubelet/pods/x/volumes/gcs-ckpt is busy",
    ),
    (
        "scheduling",
        "Warning  FailedScheduling  2m  default-scheduler  0/12 nodes are available: 12 "
        "Insufficient google.com/tpu. preemption: 0/12 nodes are available: 12 No preemption "
        "victims found for incoming pod.",
    ),
    (
        "capacity-reservation",
        "Error 409: The zone 'projects/p/zones/europe-west4-a' does not have enough resources "
        "available to fulfill the request. '(resource type:compute)'.",
    ),
    (
        "multislice-barrier",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
        "Barrier_id: PjRT_Client_Connect. Timed out task names: /job:jax_worker/replica:0/task:7",
    ),
    (
        "nodepool-config",
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, message=Invalid "
        "machine type ct5p-hightpu-8t for TPU topology 2x2x3.",
    ),
    (
        "kueue-admission",
        "Workload jobset-x is inadmissible: LocalQueue team-q doesn't exist",
    ),
    (
        "jobset-webhook-crd",
        'Error from server (InternalError): error when creating "jobset.yaml": Internal error '
        'occurred: failed calling webhook "mjobset.kb.io": failed to call webhook: Post '
        '"https://jobset-webhook-service.jobset-system.svc:443/mutate": no endpoints available '
        'for service "jobset-webhook-service"',
    ),
    (
        "preemption-maintenance",
        "Pod was terminated in response to imminent node shutdown.",
    ),
]


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_diagnose_classifier", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_diagnose_classifier"] = module
    spec.loader.exec_module(module)
    return module


def test_unit_the_shipped_model_is_what_the_tool_builds() -> None:
    shipped = (ROOT / "src" / "tpu_trainer" / "catalog" / MODEL_FILE).read_text("utf-8")
    assert _load_tool().build().to_json() == shipped, (
        "rebuild it: .venv/bin/python tools/build_diagnose_classifier.py"
    )


def test_unit_the_model_file_round_trips_and_is_valid_json() -> None:
    model = train(
        [("quota", "Quota 'TPUS' exceeded"), ("quota", "quota exceeded in region"),
         (NONE, "Warning: quota almost used")],
        min_documents=1,
    )  # fmt: skip
    text = model.to_json()
    assert json.loads(text)["classes"] == ["none", "quota"]
    assert Model.from_json(text) == model


@pytest.mark.parametrize(("family", "text"), FORMAT_FILLED, ids=[f for f, _ in FORMAT_FILLED])
def test_unit_a_format_filled_message_is_classified_in_its_family(family: str, text: str) -> None:
    verdict = packaged().classify(text)
    assert verdict is not None, packaged().verdict(text)
    assert verdict.family == family
    assert verdict.confidence >= packaged().model.threshold


@pytest.mark.parametrize(("family", "text"), UNSEEN_WORDINGS, ids=[f for f, _ in UNSEEN_WORDINGS])
def test_unit_a_wording_no_signature_knows_gets_a_family_level_match(
    family: str, text: str
) -> None:
    assert diagnose([text], classify=False) == []
    lines = ["I1124 00:00:01.000 1 train.py:10] starting", text]
    (match,) = diagnose(lines)
    assert (match.family, match.signature, match.line) == (family, f"{family}-classified", 2)
    assert match.classified and match.specificity == 0 and match.severity == "warning"
    assert match.confidence is not None and match.confidence >= packaged().model.threshold
    assert text[:60] in match.fix  # the family's fix quotes the message
    assert not re.search(r"\{[A-Za-z_]\w*\}", match.cause + match.fix), "unfilled placeholder"


def test_unit_a_verdict_is_the_same_number_whatever_the_hash_seed() -> None:
    lines = [text for _, text in FORMAT_FILLED]
    code = (
        "from tpu_trainer.plan.diagnose_classify import packaged; "
        f"print([packaged().verdict(line) for line in {lines!r}])"
    )
    said = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(said) == 1, said


def test_unit_a_classified_match_in_json_is_marked_family_level() -> None:
    text = UNSEEN_WORDINGS[0][1]
    (item,) = matches_to_json(diagnose([text]))
    assert item["signature"] == "quota-classified" and item["specificity"] == 0
    assert isinstance(item["confidence"], float)
    assert packaged().model.threshold <= item["confidence"] <= 1.0
    assert item["severity"] == "warning"
    assert item["extracted"] == {"region": "us-east5", "status": "TPUS_PER_TPU_FAMILY"}
    assert "gcloud compute regions describe us-east5" in str(item["fix"])
    assert "error_classifier.json" in str(item["source"])
    assert item["cause"] == catalog().family("quota").cause
    json.dumps(item)


def test_unit_every_near_miss_of_the_corpus_and_formats_stays_unmatched() -> None:
    quiet = [e for e in load_corpus(CORPUS) + load_service_formats(FORMATS) if e.family == NONE]
    assert len(quiet) >= 130
    for entry in quiet:
        assert best_verdict(packaged(), entry.text.splitlines()) is None, entry.text
        assert diagnose(entry.text.splitlines()) == [], entry.text


def test_unit_a_clean_run_log_gets_no_family_level_match() -> None:
    log = (FIXTURES / "diagnose" / "maxtext_cpu_run_clean.log").read_text(encoding="utf-8")
    assert diagnose(log.splitlines()) == []


@pytest.mark.parametrize(
    "line",
    [
        "I1124 00:05:01.101995 1404 train.py:80] TPUS_PER_TPU_FAMILY quota exceeded: retrying",
        "INFO:root:Error recorded: quota exceeded (handled)",
        "DEBUG: permission denied on probe, ignoring",
        '    raise QuotaError("Quota exceeded for TPUs")',
        '  File "/app/train.py", line 12, in <module>',
        "completed step: 5, seconds: 0.226, loss: 10.937, perplexity: 56225.742",
    ],
)
def test_unit_info_lines_source_lines_and_progress_are_never_classified(line: str) -> None:
    """Never as error lines: in a run's log they are not classified (a short text without an
    error line may be read whole, at its own threshold: the quiet-text tests below)."""
    assert not reads_as_error(line)
    log = [line, *(f"completed step: {i}" for i in range(WHOLE_LINES))]
    assert not any(m.classified for m in diagnose(log))


@pytest.mark.parametrize(
    "line",
    [
        "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has "
        "been waiting for 10s and may be stuck",
        "2023-04-17 19:35:38.550666: F    5184 tensorflow/compiler/xla/xla_client/"
        "xrt_computation_client.cc:1362] Non-OK-status: session.Run()",
        "W tensorflow/core/framework/op_kernel.cc:1192] Out of range: End of sequence",
        "*** SIGSEGV (@0x10), see go/stacktraces#s15 received by PID 2260 (TID 2260) on cpu 10",
        "[XPK] Key tpu-type is not an allowed xpk config key.",
        "Placement policy is not applicable to machine type n1-standard-1",
        "The node was low on resource: memory.",
    ],
)
def test_unit_tensorflow_error_prefixes_signals_and_refusals_read_as_errors(line: str) -> None:
    assert reads_as_error(line)


def test_unit_a_configuration_echo_is_never_classified() -> None:
    echo = "Config param quota_exceeded_action: fail (TPUS_PER_TPU_FAMILY allowance used up)"
    assert reads_as_error(echo)  # reads like one, but the catalog ignores echoes
    assert diagnose([echo]) == []


def test_unit_a_fatal_signature_leaves_no_room_for_guesses() -> None:
    oom = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm."
    matches = diagnose([UNSEEN_WORDINGS[1][1], oom])
    assert [m.severity for m in matches] == ["fatal"]
    assert not any(m.classified for m in matches)


def test_unit_a_follower_stops_on_signatures_only() -> None:
    text = UNSEEN_WORDINGS[0][1]
    follower = LiveScanner()
    follower.feed(text)
    assert follower.fatal == [] and follower.result() == []
    explaining = LiveScanner(classify=True)
    explaining.feed(text)
    assert explaining.fatal == []
    assert [m.signature for m in explaining.result()] == ["quota-classified"]


def test_unit_one_match_per_family_with_its_most_confident_line_and_the_count() -> None:
    first, second = UNSEEN_WORDINGS[1][1], "google.auth.exceptions.RefreshError: invalid_grant"
    matches = diagnose([first, "something else", second])
    (match,) = matches
    assert match.family == "auth-permissions" and match.count == 2
    sure = [v.confidence if v else 0.0 for v in map(packaged().classify, (first, second))]
    assert match.line == (1 if sure[0] >= sure[1] else 3)


def test_unit_features_ignore_numbers_names_paths_and_urls() -> None:
    a = features("Quota 'TPUS_V6E' exceeded: 64 of 64 at https://x.io/a/b in /var/lib/x/y")
    b = features('Quota "CPUS" exceeded: 8 of 8 at https://y.com/c in /opt/z/w/v')
    assert a == b


def test_unit_a_line_with_nothing_known_gets_no_verdict() -> None:
    assert Classifier(train([("quota", "quota exceeded")], min_documents=1)).verdict("zzz") is None


def test_unit_a_family_fix_with_a_field_no_line_provides_is_refused() -> None:
    doc = """
families:
  - {id: quota, title: Q, summary: S., cause: C., fix: "Raise {limit}."}
signatures:
  - {id: q, family: quota, needles: [quota], patterns: [quota], title: t, cause: c, fix: f,
     source: s}
"""
    with pytest.raises(CatalogError, match="placeholders a classified line cannot fill"):
        load_catalog(doc)


def test_unit_a_family_verdict_needs_the_words_its_family_requires() -> None:
    model = train(
        [("tpu-runtime", "device assert failed"), ("quota", "quota exceeded")], min_documents=1
    )
    plain = Classifier(model, requires={})
    bare, named = "device assert failed", "TPU device assert failed"
    assert plain.classify(bare) is not None
    packaged_rules = Classifier(model)  # the catalog's classify_requires
    verdict = packaged_rules.verdict(bare)
    assert verdict is not None and verdict.family == "tpu-runtime"
    assert packaged_rules.classify(bare) is None  # names no TPU, XLA, JAX or device
    assert packaged_rules.classify(named) is not None


def test_unit_a_family_requirement_must_be_a_pattern() -> None:
    doc = """
families:
  - {id: quota, title: Q, summary: S., cause: C., fix: F., classify_requires: "quota("}
signatures:
  - {id: q, family: quota, needles: [quota], patterns: [quota], title: t, cause: c, fix: f,
     source: s}
"""
    with pytest.raises(CatalogError, match="family 'quota': bad pattern"):
        load_catalog(doc)
    with pytest.raises(CatalogError, match="unknown keys colour"):
        load_catalog(doc.replace('classify_requires: "quota("', "colour: red"))


def _window_model() -> Classifier:
    """A model that knows one family's words (``zorble``, ``fizz``) and nothing of the words of
    the error lines below, so those lines are unsure alone."""
    model = train([("quota", "zorble fizz quota"), (NONE, "glarb warning")], min_documents=1)
    return Classifier(model, requires={})


REFUSED = "request refused by the frobnicator"


@pytest.mark.parametrize(
    ("lines", "line"),
    [
        (["zorble fizz happened before", REFUSED, "done"], 2),
        ([REFUSED, "zorble fizz came after"], 1),
        ([REFUSED, "one", "zorble fizz, two lines after"], 1),
    ],
)
def test_unit_a_line_unsure_alone_is_classified_with_the_lines_around_it(
    lines: list[str], line: int
) -> None:
    assert _window_model().verdict(REFUSED) is None
    (match,) = diagnose(lines, classifier=_window_model())
    assert (match.family, match.line) == ("quota", line)
    assert REFUSED in match.excerpt and "zorble" not in match.excerpt


LONG = [f"progress {i}" for i in range(WHOLE_LINES)]
"""Enough lines of a healthy run that a text holding them is not read whole."""


@pytest.mark.parametrize(
    "lines",
    [
        [REFUSED, "one", "two", "zorble fizz, three lines after", *LONG],
        ["I0301 12:00:00.000 x.py:1] zorble fizz logged at INFO", REFUSED],
        ['  File "train.py", line 3, in <module> zorble fizz', REFUSED],
    ],
)
def test_unit_a_window_holds_only_nearby_lines_of_the_run_not_info_or_source(
    lines: list[str],
) -> None:
    assert diagnose(lines, classifier=_window_model()) == []


def test_unit_a_short_text_nothing_else_explains_is_classified_whole_on_its_first_error() -> None:
    lines = ["status:", REFUSED, "one", "two", "zorble fizz, three lines after"]
    (match,) = diagnose(lines, classifier=_window_model())
    assert (match.family, match.line) == ("quota", 2)
    assert REFUSED in match.excerpt
    assert best_verdict(_window_model(), lines) is not None


@pytest.mark.parametrize(
    "lines",
    [
        [REFUSED, "one", "two", "zorble fizz, three lines after", *LONG],
        ["zorble fizz, a healthy line", *LONG],
        [REFUSED, "Quota exceeded for quota metric 'TPUS'", "zorble fizz"],
    ],
)
def test_unit_a_long_text_or_one_a_signature_explains_is_not_read_whole(lines: list[str]) -> None:
    matches = diagnose(lines, classifier=_window_model())
    assert all(m.signature != "quota-classified" for m in matches)
    if len(lines) > WHOLE_LINES:
        assert best_verdict(_window_model(), lines) is None


def test_unit_a_short_text_without_an_error_line_is_read_whole_when_the_model_is_sure() -> None:
    lines = ["", "I0501 12:50:26.228846 1 scale_up.go:341] zorble fizz", "zorble fizz again"]
    assert not any(reads_as_error(line) for line in lines)
    (match,) = diagnose(lines, classifier=_window_model())
    assert (match.family, match.line, match.severity) == ("quota", 2, "warning")
    verdict = best_verdict(_window_model(), lines)
    assert verdict is not None and verdict.confidence >= QUIET_THRESHOLD
    assert quiet_text(lines) == "\n".join(lines[1:])


def test_unit_a_quiet_text_below_its_own_threshold_or_of_source_lines_is_not_classified() -> None:
    unsure = ["zorble glarb"]  # one word of the family, one of a healthy line
    verdict = _window_model().verdict(unsure[0])
    assert verdict is not None and verdict.confidence < QUIET_THRESHOLD
    assert diagnose(unsure, classifier=_window_model()) == []
    assert best_verdict(_window_model(), unsure) is None
    source = ["    raise ZorbleFizz(quota)", '  File "zorble.py", line 3, in fizz']
    assert quiet_text(source) == ""
    assert diagnose(source, classifier=_window_model()) == []


def test_unit_a_near_miss_is_learned_alone_and_with_the_lines_around_it() -> None:
    text = "Last State: Terminated\nReason: Error\nExit Code: 0\nReady: True"
    examples = training_examples([(NONE, text), ("quota", "quota exceeded")])
    assert (NONE, "Reason: Error") in examples
    assert (NONE, "Last State: Terminated\nReason: Error\nExit Code: 0\nReady: True") in examples
    assert ("quota", "quota exceeded") in examples
    quiet = "I0501 scale_up.go:341] Skipping node group pool-a\n    raise Skip(group)\nstill fine"
    examples = training_examples([(NONE, quiet)])
    assert examples == [(NONE, "I0501 scale_up.go:341] Skipping node group pool-a\nstill fine")]


def test_unit_exit_codes_and_http_statuses_stay_features_other_numbers_do_not() -> None:
    assert features("container exited with code 137") != features("container exited with code 1")
    assert features("HTTP 403 from the server") != features("HTTP 404 from the server")
    assert features("step 1370 of 2000") == features("step 9 of 12")
