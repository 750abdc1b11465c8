"""``diagnose``: known error signatures in logs → cause → fix; the scanner, the JSON contract and
the command (tested through a Typer app of its own until the command is registered)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import (
    COMMON_MAXTEXT_KEYS,
    parse_size,
    suggest_keys,
)
from tpu_trainer.plan.diagnose import (
    LiveScanner,
    Match,
    clean_line,
    diagnose,
    excerpt,
    fill,
    has_fatal,
    matches_to_json,
)
from tpu_trainer.plan.diagnose_match import EXCERPT_CHARS

pytestmark = pytest.mark.unit

LOGS = FIXTURES / "logs"
CORPUS = FIXTURES / "diagnose" / "corpus.yaml"


def scan_file(name: str) -> list[Match]:
    with (LOGS / name).open(encoding="utf-8") as fh:
        return diagnose(fh)


def ids(matches: list[Match]) -> list[str]:
    return [m.signature for m in matches]


def only(matches: list[Match], signature: str) -> Match:
    found = [m for m in matches if m.signature == signature]
    assert len(found) == 1, ids(matches)
    return found[0]


# ---------------------------------------------------------------------------------------------
# The seed pitfalls, in logs modelled on real MaxText 0.2.5, xpk, gcloud and kubectl output
# ---------------------------------------------------------------------------------------------


def test_unit_compile_oom_fix_names_needed_and_available_hbm() -> None:
    m = only(scan_file("maxtext_aot_hbm_oom.log"), "hbm-oom-compile")
    assert m.severity == "fatal"
    assert m.line == 15
    assert "151.15G" in m.fix and "94.74G" in m.fix
    assert "1.60×" in m.fix and "56.41G too much" in m.fix
    assert "CompileTimeHbmOom" in m.excerpt


def test_unit_runtime_oom_on_tpu_vm_names_both_sizes() -> None:
    m = only(scan_file("tunix_tpu_vm.log"), "hbm-oom-runtime")
    assert "30.31G" in m.fix and "29.35G free" in m.fix
    assert "num_generations" in m.fix


def test_unit_unknown_weight_decay_suggests_adam_and_muon_weight_decay() -> None:
    matches = scan_file("maxtext_weight_decay.log")
    m = only(matches, "maxtext-unknown-key")
    assert m.line == 3  # the MAXTEXT CONFIG ERROR banner line, before the traceback's copy
    assert m.count == 2
    assert "adam_weight_decay" in m.fix and "muon_weight_decay" in m.fix
    assert "MAXTEXT CONFIG ERROR" in m.excerpt
    assert len(m.excerpt) <= EXCERPT_CHARS


def test_unit_unknown_key_typo_is_matched_against_the_keys_the_error_lists() -> None:
    line = "ValueError: 'per_device_batchsize' not in 'per_device_batch_size', 'steps', 'run_name'."
    (m,) = diagnose([line])
    assert "`per_device_batch_size=`" in m.fix


def test_unit_unknown_key_without_a_list_uses_the_common_maxtext_keys() -> None:
    (m,) = diagnose(["Key ici_fsdp_paralelism not in valid fields"])
    assert m.signature == "maxtext-unknown-key"
    assert "`ici_fsdp_parallelism=`" in m.fix


def test_unit_key_suggestions_prefer_known_renames_then_difflib() -> None:
    assert suggest_keys("weight_decay") == ("adam_weight_decay", "muon_weight_decay")
    assert suggest_keys("batch_size") == ("per_device_batch_size",)
    assert suggest_keys("max_target_lenght")[0] == "max_target_length"
    assert suggest_keys("completely_unrelated_words") == ()
    assert len(set(COMMON_MAXTEXT_KEYS)) == len(COMMON_MAXTEXT_KEYS)


def test_unit_stop_iteration_fix_names_the_min_lines_formula() -> None:
    m = only(scan_file("almodel_stop_iteration.log"), "data-exhausted")
    assert m.line == 13
    assert "steps × devices × per_device_batch_size × max_target_length / tokens_per_line" in m.fix


def test_unit_indivisible_sharding_shows_the_arithmetic_and_the_split() -> None:
    m = only(scan_file("maxtext_fsdp_indivisible.log"), "fsdp-indivisible")
    assert "1024 shards cannot split axis 0 of size 512" in m.fix
    assert "(512, 3, 128, 256)" in m.fix
    assert "ici_data_parallelism=2" in m.fix


def test_unit_legacy_divisibility_error_wrapped_over_two_lines_is_found() -> None:
    matches = scan_file("seed_fsdp_wrapped.log")
    m = only(matches, "fsdp-indivisible-legacy")
    assert m.line == 5  # the first of the two lines
    assert "1024-way sharding cannot split dimension 0 of size 512" in m.fix
    assert "ici_data_parallelism=2" in m.fix
    assert "but it is equal to 512" in m.excerpt


def test_unit_mesh_failure_names_the_axis_and_allow_split() -> None:
    m = only(scan_file("maxtext_aot_badmesh.log"), "mesh-assignment")
    assert "`tensor`" in m.fix
    assert "[0, 4, 4, 0]" in m.fix
    assert "allow_split_physical_axes=true" in m.fix


def test_unit_node_pool_provisioning_failures_each_get_their_fix() -> None:
    matches = scan_file("xpk_provision.log")
    assert ids(matches) == [
        "reservation-exhausted",
        "reservation-wrong-zone",
        "xpk-memory-limit",
        "nodepool-already-exists",
        "tpu7x-placement-invalid",
    ]
    fixes = {m.signature: m.fix for m in matches}
    assert "next reservation" in fixes["reservation-exhausted"]
    assert "zone" in fixes["reservation-wrong-zone"]
    assert "gcloud beta container node-pools create" in fixes["xpk-memory-limit"]
    assert "node-pools delete demo-v7x-np-0 --cluster" in fixes["nodepool-already-exists"]
    assert "--region" in fixes["nodepool-already-exists"]
    assert "--placement-policy" in fixes["tpu7x-placement-invalid"]


def test_unit_xpk_configmap_missing_fix_patches_the_configmap() -> None:
    (m,) = scan_file("xpk_workload_create.log")
    assert m.signature == "xpk-configmap-missing"
    assert "kubectl patch configmap <cluster>-resources-configmap --type merge" in m.fix
    assert '\'{"data":{"<device-type>":"<hosts>"}}\'' in m.fix  # JSON braces left alone


def test_unit_gke_and_kueue_events_are_diagnosed_in_log_order() -> None:
    matches = scan_file("gke_events.log")
    assert ids(matches) == [  # same line, same specificity: the reason named first
        "node-affinity-mismatch",
        "insufficient-tpu",
        "image-pull",
        "kueue-flavor",
        "kueue-preempted",
        "jobset-max-restarts",
    ]
    assert only(matches, "image-pull").count == 3
    assert "maxtext-runner:latset" in only(matches, "image-pull").fix
    assert "ResourceFlavor" in only(matches, "kueue-flavor").fix
    assert "ClusterQueue" in only(matches, "kueue-flavor").fix
    assert only(matches, "jobset-max-restarts").count == 2


def test_unit_tpu_vm_and_tunix_failures() -> None:
    matches = scan_file("tunix_tpu_vm.log")
    assert ids(matches) == ["tpu-vm-runtime-version", "tunix-section-override", "hbm-oom-runtime"]
    assert "v2-alpha-tpuv6e" in matches[0].fix
    assert "complete section" in matches[1].fix


def test_unit_ray_log_with_ansi_colours_is_cleaned_before_matching() -> None:
    (m,) = scan_file("ray_job.log")
    assert m.signature == "ray-tpu-head"
    assert m.count == 2
    assert "\x1b" not in m.excerpt
    assert "v6e-16" in m.cause + m.fix + m.excerpt


@pytest.mark.parametrize("name", ["maxtext_cpu_clean.log"])
def test_unit_a_clean_run_yields_nothing(name: str) -> None:
    assert scan_file(name) == []


def test_unit_clean_cpu_noise_lines_do_not_trigger_tpu_signatures() -> None:
    noise = [
        "E0000 00:00:1795321767.600606 1701 common_lib.cc:906] INVALID_ARGUMENT: Error: "
        "unexpected worker hostname 'WARNING: could not determine TPU worker hostnames'",
        "I0301 xla_bridge.py:861] Unable to initialize backend 'tpu': NOT_FOUND: TPU "
        "initialization failed: No jellyfish device found.",
        "I0301 max_utils.py:788] \tMemstats unavailable, error: 'NoneType' object is not "
        "subscriptable",
        "\tExit status: 0",
    ]
    assert diagnose(noise) == []


# ---------------------------------------------------------------------------------------------
# Scanner mechanics
# ---------------------------------------------------------------------------------------------


def test_unit_fatal_matches_come_before_warnings_then_by_first_line() -> None:
    lines = [
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds.",
        "Allocation of 414988800 exceeds 10% of free system memory.",
        "StopIteration",
        "StopIteration",
        "Error: ErrImagePull",
    ]
    matches = diagnose(lines)
    assert ids(matches) == [
        "data-exhausted",
        "image-pull",
        "tpu-init-slow",
        "host-allocation-warning",
    ]
    assert [m.line for m in matches] == [3, 5, 1, 2]
    assert matches[0].count == 2
    assert has_fatal(matches)
    assert not has_fatal(matches[2:])


def test_unit_a_line_already_matched_is_not_counted_again_when_joined() -> None:
    matches = diagnose(["StopIteration", "next line"])
    assert [(m.signature, m.line, m.count) for m in matches] == [("data-exhausted", 1, 1)]


def test_unit_streaming_scan_reads_a_generator_once() -> None:
    consumed = 0

    def noise() -> Iterator[str]:
        nonlocal consumed
        for i in range(50_000):
            consumed += 1
            yield (
                f"I0301 11:00:{i % 60:02d}.000000 1397 metric_logger.py:265] completed step: {i}, "
                f"seconds: 0.5, TFLOP/s/device: 0.01, Tokens/s/device: 200.0, loss: 10.5\n"
            )
        consumed += 1
        yield "ValueError: global size of its dimension 0 should be divisible by 1024,\n"
        consumed += 1
        yield "but it is equal to 512 (full shape: (512, 3, 128, 256))\n"

    matches = diagnose(noise())
    assert consumed == 50_002
    assert [(m.signature, m.line) for m in matches] == [("fsdp-indivisible-legacy", 50_001)]


def test_unit_json_contract_keys_are_pinned() -> None:
    doc = matches_to_json(scan_file("maxtext_aot_hbm_oom.log"))
    assert isinstance(doc, list) and len(doc) == 1
    (item,) = doc
    assert set(item) == {
        "family",
        "signature",
        "line",
        "extracted",
        "cause",
        "fix",
        "source",
        "matched",
        "count",
        "title",
        "severity",
        "specificity",
        "confidence",
    }
    assert item["specificity"] == 3 and item["confidence"] is None
    assert item["family"] == "out-of-memory"
    assert item["signature"] == "hbm-oom-compile"
    assert item["line"] == 15 and item["count"] == 1 and item["severity"] == "fatal"
    assert item["extracted"] == {
        "what": "HLO temporaries",
        "needed": "151.15G",
        "available": "94.74G",
    }
    assert isinstance(item["matched"], str) and "151.15G" in item["matched"]
    assert "seed 001" in str(item["source"])
    json.dumps(doc)


def test_unit_excerpt_of_a_long_line_shows_the_match() -> None:
    text = "x" * 1000 + " the needle " + "y" * 1000
    start = text.index("needle")
    piece = excerpt(text, start, start + 6)
    assert "needle" in piece and len(piece) <= EXCERPT_CHARS
    assert piece.startswith("…") and piece.endswith("…")
    assert excerpt("  short line  ", 2, 7) == "short line"


def test_unit_fill_replaces_named_values_and_marks_missing_ones() -> None:
    template = "delete {pool} in {zone}{note}; keep {\"data\":1} and '{.spec.x}' in {region}"
    out = fill(template, {"pool": "np-1", "zone": None, "note": ""})
    assert out == "delete np-1 in <zone>; keep {\"data\":1} and '{.spec.x}' in <region>"


def test_unit_clean_line_strips_ansi_and_line_endings() -> None:
    assert clean_line("\x1b[33m(raylet)\x1b[0m hello\r\n") == "(raylet) hello"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("151.15G", 151.15 * 2**30), ("31.06M", 31.06 * 2**20), ("1.5GiB", 1.5 * 2**30), ("x", None)],
)
def test_unit_parse_size(text: str, expected: float | None) -> None:
    assert parse_size(text) == expected


def test_unit_within_one_message_its_reason_ranks_before_the_wrapper_state() -> None:
    wrapper = (
        'Error reading NodePool "tpu" from cluster "train": Nodepool "tpu" has status '
        '"RUNNING_WITH_ERROR" with message "us-east5-b: Deploy error: '
    )
    reason = (
        "Not all instances running in IGM after 45s. Expect 4. Current errors: "
        "[ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS]: Instance 'gke-train-tpu-1' creation failed"
    )
    assert [m.family for m in diagnose([wrapper, reason])][:2] == [
        "capacity-reservation",
        "nodepool-config",
    ]
    # Two lines without a match between them still leave one message (a client library's
    # status, reason and headers before its body) ...
    assert [m.family for m in diagnose([wrapper, "Reason: Bad Request", "headers", reason])][
        :2
    ] == ["capacity-reservation", "nodepool-config"]
    # ... three make two messages: the earlier one first.
    assert [m.family for m in diagnose([wrapper, "step 7", "step 8", "step 9", reason])][:2] == [
        "nodepool-config",
        "capacity-reservation",
    ]


@pytest.mark.parametrize(
    ("line", "family"),
    [
        (
            "(autoscaler +2m2s) Warning: The following resource request cannot be scheduled right "
            "now: {'CPU': 1.0, 'TPU': 4.0}.",
            "scheduling",
        ),
        ("Warning: 1 pending placement groups", "scheduling"),
        (
            "Error: No available node types can fulfill resource request {'TPU': 4.0}. Add "
            "suitable node types to this cluster to resolve this issue.",
            "autoscaling-provisioning",
        ),
        (
            "Instance 8f2a6c1e(QUEUED) is stuck in QUEUED for 600.0 seconds.",
            "autoscaling-provisioning",
        ),
        ('Evicted due to AdmissionCheck in Retry state: "dws-prov"', "kueue-admission"),
    ],
)
def test_unit_a_wait_ray_or_kueue_retries_by_itself_is_named_but_never_stops_a_run(
    line: str, family: str
) -> None:
    scanner = LiveScanner()
    scanner.feed(line)
    assert scanner.fatal == []
    (match,) = diagnose([line], classify=False)
    assert (match.family, match.severity) == (family, "warning")
