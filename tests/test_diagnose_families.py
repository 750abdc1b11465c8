"""``diagnose`` by family: the corpus of real error texts, variants of known errors, ranking,
the catalog file's checks, and bad input to the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import (
    CatalogError,
    catalog,
    families,
    load_catalog,
    signatures,
)
from tpu_trainer.plan.diagnose import Match, diagnose
from tpu_trainer.plan.diagnose_score import NONE, Entry, load_corpus, predict, score

pytestmark = pytest.mark.unit

CORPUS = FIXTURES / "diagnose" / "corpus.yaml"
ENTRIES = load_corpus(CORPUS)


def first(text: str) -> Match:
    matches = diagnose(text.splitlines())
    assert matches, text
    return matches[0]


# ---------------------------------------------------------------------------------------------
# The corpus of real error texts
# ---------------------------------------------------------------------------------------------


def test_unit_corpus_is_large_cites_its_sources_and_spans_the_families() -> None:
    assert len(ENTRIES) >= 150
    assert all(e.source.startswith("https://") for e in ENTRIES)
    assert len({e.text for e in ENTRIES}) == len(ENTRIES), "duplicate texts"
    known = {f.id for f in families()} | {NONE}
    assert {e.family for e in ENTRIES} <= known
    assert len({e.family for e in ENTRIES} - {NONE}) >= 17
    assert sum(e.family == NONE for e in ENTRIES) >= 25
    assert {e.split for e in ENTRIES} == {"dev", "heldout"}


def test_scenario_corpus_texts_land_in_their_family_and_near_misses_match_nothing() -> None:
    result = score(ENTRIES)
    report = [f"{o.entry.family} -> {o.predicted}: {o.entry.source}" for o in result.misses]
    assert result.rate >= 0.95, report
    assert not result.near_misses_matched, report


def test_unit_held_out_split_is_scored_on_its_own() -> None:
    heldout = score(ENTRIES, "heldout")
    dev = score(ENTRIES, "dev")
    assert len(heldout.outcomes) + len(dev.outcomes) == len(ENTRIES)
    assert 0.15 <= len(heldout.outcomes) / len(ENTRIES) <= 0.35
    assert heldout.rate >= 0.9


def test_unit_family_scores_count_hits_predictions_and_texts() -> None:
    entries = [
        Entry(family="quota", source="https://x", text="Quota 'CPUS' exceeded. Limit: 8.0"),
        Entry(family="quota", source="https://x", text="all good here"),
        Entry(family=NONE, source="https://x", text="Quota 'GPUS' exceeded. Limit: 0.0"),
    ]
    (quota,) = score(entries).families()
    assert (quota.expected, quota.predicted, quota.hits) == (2, 2, 1)
    assert quota.precision == 0.5 and quota.recall == 0.5
    assert len(score(entries).near_misses_matched) == 1


def test_unit_load_corpus_rejects_entries_without_a_source(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("- family: quota\n  text: x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="entry 1"):
        load_corpus(path)


# ---------------------------------------------------------------------------------------------
# Variants of known errors: other numbers, names, quoting and surrounding words
# ---------------------------------------------------------------------------------------------


VARIANTS = [
    (
        "RESOURCE_EXHAUSTED: Attempting to reserve 12.25G at the bottom of memory. "
        "That was not possible. There are 9.5G free, 0B reserved, and 9.5G reservable.",
        "out-of-memory",
        {"needed": "12.25G", "available": "9.5G"},
        "9.5G free",
    ),
    (
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting "
        "to allocate 2.00GiB. That was not possible. There are 512.00MiB free.",
        "out-of-memory",
        {"needed": "2.00GiB", "available": "512.00MiB"},
        "Wanted 2.00GiB",
    ),
    (
        "message: The zone 'projects/p/zones/europe-west4-b' does not have enough "
        "resources available to fulfill the request.",
        "capacity-reservation",
        {"zone": "europe-west4-b"},
        "another zone than europe-west4-b",
    ),
    (
        "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to open "
        "/usr/lib/python3/site-packages/libtpu/libtpu.so: cannot open shared object file",
        "tpu-runtime",
        {},
        "jax[tpu]",
    ),
]


@pytest.mark.parametrize(("text", "family", "fields", "in_fix"), VARIANTS)
def test_unit_variants_extract_their_fields_into_the_fix(
    text: str, family: str, fields: dict[str, str], in_fix: str
) -> None:
    m = first(text)
    assert m.family == family
    assert fields.items() <= dict(m.extracted).items()
    assert in_fix in m.fix


@pytest.mark.parametrize(
    "text",
    [
        "0/12 nodes are available: 12 Insufficient google.com/tpu.",
        "Warning FailedScheduling pod/w-0 0/3 nodes are available: 1 node(s) had untolerated "
        "taint {x: y}, 2 Insufficient google.com/tpu. preemption: 0/3 nodes are available",
        "default-scheduler  0/64 nodes are available: 64 insufficient google.com/tpu",
    ],
)
def test_unit_insufficient_tpu_is_found_whatever_the_words_around_it(text: str) -> None:
    signatures_found = {m.signature for m in diagnose([text])}
    assert "insufficient-tpu" in signatures_found
    assert first(text).family == "scheduling"


def test_unit_a_message_wrapped_over_two_lines_is_found_on_its_first_line() -> None:
    lines = [
        "ERROR: (gcloud.container.clusters.create) ResponseError: code=403, message=",
        '   (1) insufficient regional quota to satisfy request: resource "TPUS": request',
    ]
    m = first("\n".join(lines))
    assert m.family == "quota"
    assert m.line == 2


def test_unit_reservation_fix_names_the_extracted_reservation_and_zone() -> None:
    m = first(
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=429, message="
        'specific reservation "res-b" is insufficient for node pool "np-0" at zone '
        '"us-east5-b": required 16 and short of 4 VM count'
    )
    assert m.signature == "reservation-insufficient"
    assert dict(m.extracted)["reservation"] == "res-b"
    assert "reservations describe res-b --zone=us-east5-b" in m.fix


def test_unit_kubernetes_rbac_forbidden_names_the_user() -> None:
    m = first(
        'Error from server (Forbidden): jobsets.jobset.x-k8s.io is forbidden: User "me@x.com" '
        'cannot create resource "jobsets" in API group "jobset.x-k8s.io"'
    )
    assert m.family == "auth-permissions"
    assert dict(m.extracted)["user"] == "me@x.com"
    assert "me@x.com" in m.cause


@pytest.mark.parametrize(
    ("text", "family"),
    [
        (
            "Node scale up in zones us-central2-b associated with this pod failed: GCE quota "
            "exceeded. Pod is at risk of not being scheduled.",
            "autoscaling-provisioning",
        ),
        (
            "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
            "message=Maximum node count 0 is not a valid size of TPU pod slice with topology "
            "4x4x4",
            "autoscaling-provisioning",
        ),
        (
            "couldn't assign flavors to pod set main: topology \"tpu-topology\" doesn't exist",
            "kueue-admission",
        ),
        (
            'Internal error occurred: failed calling webhook "mjobset.kb.io": failed to call '
            'webhook: Post "https://jobset-webhook-service.jobset-system.svc:443/mutate": '
            'no endpoints available for service "jobset-webhook-service"',
            "jobset-webhook-crd",
        ),
        (
            'error: resource mapping not found for name: "cluster-queue" namespace: "": no '
            'matches for kind "ClusterQueue" in version "kueue.x-k8s.io/v1beta1"',
            "jobset-webhook-crd",
        ),
        (
            "ERROR: (gcloud.compute.tpus.queued-resources.create) INVALID_ARGUMENT: Cloud TPU "
            'received a bad request. runtime version "v2-alpha-tpuv7" is not supported',
            "tpu-vm-create",
        ),
        ("ModuleNotFoundError: No module named 'MaxText'", "image-entrypoint"),
        (
            "Status: Failed\nReason: Terminated\nMessage: Pod was terminated in response to "
            "imminent node shutdown.",
            "preemption-maintenance",
        ),
    ],
)
def test_unit_families_the_old_catalog_missed(text: str, family: str) -> None:
    assert first(text).family == family


WORDINGS = [
    (
        "ValueError: Resource axis: model of PartitionSpec('data', 'model') is not found in mesh",
        "mesh-sharding",
    ),
    ("omegaconf.errors.ConfigAttributeError: Key 'max_stpes' is not in struct", "training-config"),
    ("RuntimeError: No TPU devices found.", "tpu-runtime"),
    ("Couldn't open iommu group /dev/vfio/0", "tpu-runtime"),
    (
        "python3: can't open file '/app/train.py': [Errno 2] No such file or directory",
        "image-entrypoint",
    ),
    (
        "Error: manifest for us-docker.pkg.dev/p/r/img:v1 not found: manifest unknown",
        "image-entrypoint",
    ),
    (
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints.",
        "scheduling",
    ),
    ('Error 404: reservation "tpu-res" not found', "capacity-reservation"),
    ("ProvisioningRequest status: BookingExpired", "autoscaling-provisioning"),
    ("Workload evicted: Exceeded the PodsReady timeout default/job-x", "kueue-admission"),
    ("E megascale_client.cc:89] Megascale error: transfer to slice 2 failed", "multislice-barrier"),
    ("ValueError: The dataset is empty", "data-exhausted"),
    ("Warning  Evicted  The node was low on resource: memory.", "out-of-memory"),
    (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) ALREADY_EXISTS: Resource "
        "'projects/p/locations/us-central2-b/nodes/t1' already exists",
        "tpu-vm-create",
    ),
]


@pytest.mark.parametrize(("text", "family"), WORDINGS)
def test_unit_other_wordings_of_a_family_land_in_it(text: str, family: str) -> None:
    assert first(text).family == family


@pytest.mark.parametrize(
    "text",
    [
        "I0301 xla_bridge.py:861] Unable to initialize backend 'tpu': NOT_FOUND: TPU "
        "initialization failed: No jellyfish device found.",
        "[XPK] Task: `Create or update node pools` is implemented by: gcloud beta container "
        "node-pools create np-0 --reservation-affinity=specific --reservation=res-a",
        "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/"
        "us-central1-b/instanceGroups/g 3->5 (max: 6)}]",
        "        except StopIteration:",
        "Quota reserved in ClusterQueue tas-main, wait time since queued was 3s",
    ],
)
def test_unit_success_lines_command_echoes_and_info_logs_match_nothing(text: str) -> None:
    assert diagnose(text.splitlines()) == []


def test_scenario_a_real_maxtext_run_yields_nothing_even_without_ignored_lines() -> None:
    lines = (FIXTURES / "diagnose" / "maxtext_cpu_run_clean.log").read_text("utf-8").splitlines()
    assert sum("Config param" in line for line in lines) > 800
    assert diagnose(lines) == []
    assert diagnose(lines, signatures()) == []  # the patterns alone, no ignored lines


@pytest.mark.parametrize(
    "line",
    [
        "I1124 00:05:02.0 1 pyconfig.py:591] Config param override_model_config: True",
        "I1124 00:05:02.0 1 pyconfig.py:591] Config param autoregressive_decode_assert: ",
        "[XPK] Task: `Describe reservation` is implemented by: gcloud beta compute reservations "
        "describe res-a --zone=us-central1-c  # RESOURCE_EXHAUSTED handled below",
    ],
)
def test_unit_configuration_and_command_echoes_are_never_scanned(line: str) -> None:
    ignore = catalog().ignore
    assert ignore is not None and ignore.search(line)
    assert diagnose([line]) == []


def test_unit_an_ignored_line_does_not_join_with_the_next() -> None:
    lines = ["Config param note: jobset failed due to reaching max", "number of restarts"]
    assert diagnose(lines) == []
    assert [m.signature for m in diagnose(lines, signatures())] == ["jobset-max-restarts"]


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------


def test_unit_the_earliest_fatal_line_ranks_first_whatever_its_family() -> None:
    lines = [
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds.",
        "ValueError: Number of devices 8 must equal the product of mesh_shape (1, 16)",
        "Message: jobset failed due to one or more job failures",
    ]
    matches = diagnose(lines)
    assert [(m.family, m.line) for m in matches] == [
        ("mesh-sharding", 2),
        ("jobset-webhook-crd", 3),
        ("tpu-runtime", 1),  # a warning comes after every fatal match
    ]


def test_unit_on_one_line_the_more_specific_signature_of_a_family_wins() -> None:
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space hbm. Used 21.90G of 7.48G hbm."
    )
    assert [m.signature for m in diagnose([text])] == ["hbm-oom-legacy"]


def test_unit_on_one_line_a_more_specific_family_ranks_before_a_generic_one() -> None:
    text = (
        '{"code":403,"message":"Insufficient project quota to satisfy request: resource '
        '\\"CPUS_ALL_REGIONS\\": request requires \'16.0\'","status":"PERMISSION_DENIED"}'
    )
    assert [m.family for m in diagnose([text])] == ["quota", "auth-permissions"]


def test_unit_a_catch_all_is_dropped_when_its_family_has_a_specific_match() -> None:
    lines = [
        "Warning  BackOff  kubelet  Back-off restarting failed container trainer in pod w-0",
        'exec: "python3": executable file not found in $PATH',
    ]
    assert [m.signature for m in diagnose(lines)] == ["entrypoint-not-found"]
    assert [m.signature for m in diagnose(lines[:1])] == ["container-crashloop"]


def test_unit_a_crash_loop_gives_way_to_the_error_that_caused_it_in_any_family() -> None:
    describe = [
        "    State:          Waiting",
        "      Reason:       CrashLoopBackOff",
        "    Last State:     Terminated",
        "      Reason:       OOMKilled",
        "      Exit Code:    137",
    ]
    assert [m.signature for m in diagnose(describe)] == ["host-oom-killed"]
    # The cause first, the loop after it: the loop is still dropped.
    assert [m.family for m in diagnose([*describe[2:], *describe[:2]])] == ["out-of-memory"]
    # Only a warning besides the loop: the loop stays, ranked as the fatal error it is.
    alone = diagnose([describe[1], "error: must specify one of -f and -k"])
    assert [m.signature for m in alone] == ["container-crashloop", "kubectl-arguments"]


def test_unit_a_container_named_in_a_comma_list_reaches_the_fix_without_its_comma() -> None:
    text = "error: container jax-tpu-9 is not valid for pod run-0-1-x out of: jax-tpu-1, jax-tpu-2"
    (match,) = diagnose([text])
    assert match.fix == "`kubectl logs run-0-1-x -c jax-tpu-1`."


def test_unit_ranks_are_stable_in_json_order() -> None:
    text = (FIXTURES / "logs" / "gke_events.log").read_text(encoding="utf-8")
    matches = diagnose(text.splitlines())
    keys = [(m.severity != "fatal", m.line) for m in matches]
    assert keys == sorted(keys)


# ---------------------------------------------------------------------------------------------
# The catalog file
# ---------------------------------------------------------------------------------------------

GOOD = """
families:
  - {id: quota, title: Quota, summary: Project quota., cause: Too little quota., fix: "Raise it: {message}."}
signatures:
  - id: q
    family: quota
    needles: [quota]
    patterns: ["Quota '(?P<quota>\\\\w+)' exceeded"]
    title: t
    cause: c
    fix: Raise {quota}.
    source: https://example.com
"""


def test_unit_a_small_catalog_loads_and_compiles_case_insensitive_patterns() -> None:
    cat = load_catalog(GOOD)
    (sig,) = cat.signatures
    assert sig.family == "quota" and sig.specificity == 2 and not sig.fallback
    assert sig.search("QUOTA 'CPUS' EXCEEDED") is not None
    assert cat.family("quota").title == "Quota"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("family: quota\n    needles", "family: nope\n    needles"), "unknown family"),
        (("Raise {quota}.", "Raise {limit}."), "placeholders no pattern fills: limit"),
        (("[quota]", "[Quota]"), "needles must be lower case"),
        (('exceeded"]', 'exceeded("]'), "bad pattern"),
        (("    title: t", "    colour: red\n    title: t"), "unknown keys colour"),
        (("id: q\n", "id: Q_1\n"), "lower-case words"),
    ],
)
def test_unit_catalog_errors_name_the_signature_and_the_problem(
    change: tuple[str, str], message: str
) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(CatalogError, match=message):
        load_catalog(GOOD.replace(old, new), "test.yaml")


def test_unit_catalog_ignore_lines_must_be_patterns() -> None:
    assert load_catalog(GOOD).ignore is None
    with pytest.raises(CatalogError, match="ignore_lines"):
        load_catalog(GOOD + "ignore_lines: [1]\n")
    ignore = load_catalog(GOOD + "ignore_lines: ['^echo ', 'Config param']\n").ignore
    assert ignore is not None and ignore.search("CONFIG PARAM x: 1")


def test_unit_catalog_rejects_a_family_without_signatures() -> None:
    text = GOOD.replace(
        "families:\n", "families:\n  - {id: spare, title: S, summary: S., cause: C., fix: F.}\n"
    )
    with pytest.raises(CatalogError, match="families without signatures: spare"):
        load_catalog(text)


def test_unit_packaged_catalog_is_loaded_once() -> None:
    assert catalog() is catalog()
    assert signatures() is catalog().signatures


def test_unit_every_family_has_a_fatal_signature_and_fixes_name_a_command_or_setting() -> None:
    fatal_families = {s.family for s in signatures() if s.severity == "fatal"}
    assert len(fatal_families) >= len(families()) - 1  # kubectl usage is only a warning
    for sig in signatures():
        if sig.severity == "fatal" and "seed " not in sig.source:
            assert "`" in sig.fix or "=" in sig.fix, sig.id


def test_unit_predict_names_the_first_family_or_none() -> None:
    assert predict("all good") == NONE
    assert predict("StopIteration") == "data-exhausted"
