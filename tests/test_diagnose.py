"""``diagnose``: known error signatures in logs → cause → fix; the scanner, the JSON contract and
the command (tested through a Typer app of its own until the command is registered)."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import FIXTURES
from tpu_trainer.catalog.error_signatures import (
    COMMON_MAXTEXT_KEYS,
    by_id,
    families,
    parse_size,
    signatures,
    suggest_keys,
)
from tpu_trainer.cli.diagnose_cmd import diagnose as diagnose_command
from tpu_trainer.errors import InputError
from tpu_trainer.plan.diagnose import (
    EXCERPT_CHARS,
    Match,
    clean_line,
    diagnose,
    excerpt,
    fill,
    has_fatal,
    matches_to_json,
)
from tpu_trainer.plan.diagnose_score import load_corpus

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
# One example per signature: each is found, by that signature alone, with every value filled
# ---------------------------------------------------------------------------------------------

EXAMPLES: dict[str, tuple[str, str]] = {
    "fsdp-indivisible": (
        "jax._src.sharding.IndivisibleError: Sharding NamedSharding(mesh=Mesh('fsdp': 64)) "
        "implies that array axis 0 is partitioned 64 times, but the dimension size is 13904 "
        "(full shape: (13904, 13904), per-dimension tiling factors: (64, 1) should evenly "
        "divide the shape)",
        "ici_data_parallelism=4",
    ),
    "fsdp-indivisible-legacy": (
        "ValueError: global size of its dimension 0 should be divisible by 8, but it is "
        "equal to 28",
        "ici_data_parallelism=2",
    ),
    "mesh-assignment": (
        "NotImplementedError: Failed to find assignment for logical_axis_index 5 of size 2\n"
        "with remaining assignable mesh [0, 4, 4, 0]",
        "`sequence` (older releases: `context`)",
    ),
    "hbm-oom-compile": (
        "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total "
        "memory required for HLO temporaries (112.90G) exceeds available HBM (94.74G).",
        "112.90G per device, 94.74G available (1.19×",
    ),
    "hbm-oom-legacy": (
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory "
        "space hbm. Used 20.50G of 15.48G hbm. Exceeded hbm capacity by 5.02G.",
        "Uses 20.50G of 15.48G",
    ),
    "vmem-oom": (
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded "
        "vmem capacity by 16.42M",
        "sa_block_q",
    ),
    "hbm-oom-runtime": (
        "RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 31.06M. That was not "
        "possible. There are 58.64M free. Due to fragmentation, the largest contiguous region "
        "of free memory is 30.56M.; (0x0x0_HBM0)",
        "free memory is fragmented",
    ),
    "data-exhausted": ("StopIteration", "min_lines"),
    "maxtext-unknown-key": (
        "E0301 pyconfig.py:393] MAXTEXT CONFIG ERROR: 'lr' not in 'learning_rate', 'steps'.",
        "`learning_rate=`",
    ),
    "cpu-run-distributed": (
        '    process_id=int(os.environ.get("JOB_INDEX")),\n'
        "TypeError: int() argument must be a string, a bytes-like object or a real number, "
        "not 'NoneType'",
        "skip_jax_distributed_system=true",
    ),
    "optax-consistent-rms": (
        "TypeError: muon() got an unexpected keyword argument 'consistent_rms'",
        "optax",
    ),
    "jax-non-addressable": (
        "RuntimeError: Fetching value for `jax.Array` that spans non-addressable (non process "
        "local) devices is not possible.",
        "process_allgather",
    ),
    "tpu-vm-runtime-version": (
        "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU "
        "topology.",
        "--version=v2-alpha-tpuv6e",
    ),
    "libtpu-in-use": (
        "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use "
        "by process with pid 2718466. Not attempting to load libtpu.so in this process.",
        "kill 2718466",
    ),
    "tpu-device-permission": (
        "jaxlib._jax.XlaRuntimeError: UNKNOWN: TPU initialization failed: open(/dev/accel3): "
        "Operation not permitted: Operation not permitted; Couldn't open device: /dev/accel3",
        "sudo lsof -w /dev/accel3",
    ),
    "tpu-worker-addresses": (
        "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: Invalid "
        "--2a886c8_slice_builder_worker_addresses specified. Expected 4 worker addresses, got 1.",
        "--worker=all",
    ),
    "tpu-init-slow": (
        "UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you run "
        "your code on all TPU hosts?",
        "all workers",
    ),
    "jax-barrier-timeout": (
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
        "Barrier_id: PjRT_Client_Connect. Timed out task names:",
        "JAX_COORDINATION_SERVICE_HEARTBEAT_TIMEOUT_SECONDS",
    ),
    "megascale-deadline": (
        "E0301 12:00:00.000 megascale_client.cc:210] DEADLINE_EXCEEDED: transfer to slice 1 "
        "did not finish within 300s",
        "--megascale_grpc_interface_prefixes",
    ),
    "host-oom-killed": ("      Reason:       OOMKilled", "memory limit"),
    "host-allocation-warning": (
        "W tensorflow/tsl/framework/cpu_allocator_impl.cc:83] Allocation of 414988800 exceeds "
        "10% of free system memory.",
        "buffering",
    ),
    "xla-spawn-nprocs": ("WARNING:root:Unsupported nprocs (8), ignoring...", "xla_fsdp_v2"),
    "tunix-section-override": (
        "TypeError: RLTrainingConfig.__init__() missing 1 required positional argument: "
        "'eval_every_n_steps'",
        "complete section",
    ),
    "ray-tpu-head": (
        "(JaxTrainer pid=812) Failed to reserve TPU head for slice with shape: v4-32",
        "ray job stop",
    ),
    "xpk-configmap-missing": (
        "[XPK] Workload scheduling validation failed. XPK will not create the workload w1.",
        "kubectl patch configmap",
    ),
    "kueue-tpu-quota": (
        "Warning  Pending  3m  kueue-admission  couldn't assign flavors to pod set slice-job: "
        "insufficient quota for google.com/tpu in flavor 1xtpu7x-256, request > maximum "
        "capacity (256 > 128)",
        "nominalQuota for google.com/tpu in flavor 1xtpu7x-256",
    ),
    "kueue-cpu-memory-quota": (
        "Warning  Pending  4m23s  kueue-admission  couldn't assign flavors to pod set job: "
        "resource memory unavailable in ClusterQueue",
        "Remove memory from the ClusterQueue",
    ),
    "kueue-flavor": ("Kueue admission failed: flavor doesn't match", "ResourceFlavor"),
    "kueue-preempted": (
        "Message: Preempted to accommodate a workload (UID: abc-123, JobUID: job-456) due to "
        "prioritization in the ClusterQueue",
        "--priority=very-high",
    ),
    "jobset-max-restarts": (
        "Message: jobset failed due to reaching max number of restarts",
        "--max-restarts",
    ),
    "jobset-failed-jobs": (
        "Message: jobset failed due to one or more job failures",
        "tpu-trainer diagnose -",
    ),
    "image-pull": ("  Warning  Failed  12s  kubelet  Error: ImagePullBackOff", "artifactregistry"),
    "insufficient-tpu": (
        "0/8 nodes are available: 8 Insufficient\ngoogle.com/tpu. preemption: 0/8 nodes",
        "node-pools list",
    ),
    "node-affinity-mismatch": (
        "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.",
        "--placement-policy",
    ),
    "untolerated-taint": (
        "0/1 nodes are available: 1 node(s) had untolerated taint {google.com/tpu: present}.",
        "toleration",
    ),
    "kubectl-container-name": (
        "error: a container name must be specified for pod w1-slice-job-0-0-abcde, choose one "
        "of: [jax-tpu-1 jax-tpu-2]",
        "kubectl logs w1-slice-job-0-0-abcde -c jax-tpu-1",
    ),
    "reservation-exhausted": (
        "[XPK] No available resources in reservation res-a",
        "next reservation",
    ),
    "capacity-stockout": (
        "Current errors: [GCE_STOCKOUT]: Instance 'gke-np-1' creation failed: The zone "
        "'projects/p/zones/us-central1-c' does not have enough resources available to fulfill "
        "the request.",
        "another zone",
    ),
    "reservation-wrong-zone": (
        "ERROR: (gcloud.beta.container.node-pools.create) ResponseError: code=400, "
        "message=Reservation is incorrect for the requested resources.",
        "--node-locations",
    ),
    "nodepool-already-exists": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=409, message=Already "
        "exists: projects/p/locations/us-central1/clusters/c/nodePools/np-tpu7x-64.",
        "node-pools delete np-tpu7x-64 ",
    ),
    "tpu7x-placement-invalid": (
        "ERROR: (gcloud.container.node-pools.create) INVALID_ARGUMENT: --placement-type "
        "COMPACT is not supported with machine type tpu7x-standard-4t",
        "workload-policy",
    ),
    "nodepool-machine-type": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, message=Machine "
        "type with name 'ct7x-4x4x8' does not exist in zone 'us-central1-ai1a'.",
        "tpu7x-standard-4t",
    ),
    "xpk-memory-limit": (
        "AttributeError: 'Namespace' object has no attribute 'memory_limit'",
        "gcloud beta container node-pools create",
    ),
    "gcp-quota": (
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) Quota 'TPUS_PER_TPU_FAMILY' exceeded. "
        "Limit: 0.0 in region us-east5.",
        "Request more TPUS_PER_TPU_FAMILY for region us-east5 (Console → IAM & Admin → "
        "Quotas; limit now 0.0)",
    ),
    "gcsfuse-mount": (
        'Warning  FailedMount  55s  kubelet  MountVolume.SetUp failed for volume "gcs-fuse-csi-'
        'ephemeral" : rpc error: code = PermissionDenied desc = the sidecar container failed '
        "with error: mountWithArgs: mountWithStorageHandle",
        "GcsFuseCsiDriver=ENABLED",
    ),
    "preempted-or-maintenance": (
        "ERROR: TPU t1 in zone us-central2-b is PREEMPTED; the workers lost their slice",
        "enable_checkpointing=true",
    ),
    "sharding-generic": (
        "jax._src.sharding_impls.IndivisibleError: NamedSharding(mesh=Mesh('fsdp': 3), "
        "spec=PartitionSpec('fsdp',)) is not divisible for this array",
        "allow_split_physical_axes=true",
    ),
    "nodepool-create-rejected": (
        "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, message=Node "
        "pools of this cluster must be in zone us-central1-a.",
        "tpu-trainer slice",
    ),
    "xpk-error": (
        "[XPK] Cluster demo does not exist in us-central1, Exiting XPK",
        "--dry-run",
    ),
    "gcs-permission": (
        "google.api_core.exceptions.Forbidden: 403 POST https://storage.googleapis.com/upload/"
        "storage/v1/b/demo/o: trainer@p.iam.gserviceaccount.com does not have "
        "storage.objects.create access to the Google Cloud Storage object.",
        "roles/storage.objectAdmin",
    ),
}


def test_unit_every_signature_has_an_example_or_a_corpus_text() -> None:
    covered = set(EXAMPLES) | {
        m.signature for entry in load_corpus(CORPUS) for m in diagnose(entry.text.splitlines())
    }
    assert {s.id for s in signatures()} <= covered


@pytest.mark.parametrize("signature", sorted(EXAMPLES))
def test_unit_example_is_found_by_its_signature_alone(signature: str) -> None:
    text, expected = EXAMPLES[signature]
    matches = diagnose(text.split("\n"))
    assert ids(matches) == [signature]
    (m,) = matches
    assert m.line == 1
    assert m.severity == by_id(signature).severity
    assert expected in m.fix, m.fix
    assert not re.search(r"\{[A-Za-z_]\w*\}", m.cause + m.fix), "unfilled placeholder"


def test_unit_catalog_is_well_formed() -> None:
    names = [s.id for s in signatures()]
    assert len(names) == len(set(names))
    assert len(signatures()) >= 70
    family_ids = {f.id for f in families()}
    assert len(family_ids) >= 17
    for sig in signatures():
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", sig.id), sig.id
        assert sig.family in family_ids, sig.id
        assert sig.severity in ("fatal", "warning")
        assert sig.specificity in (1, 2, 3)
        assert sig.needles and all(n == n.lower() and n for n in sig.needles), sig.id
        assert sig.title and sig.cause and sig.fix and sig.source
        assert sig.source.startswith(("seed ", "shared design", "https://")), sig.id


def test_unit_issue_sourced_signatures_cite_public_issues() -> None:
    urls = {
        url
        for sig in signatures()
        for url in re.findall(r"https://github\.com/\S+/(?:issues|pull)/\d+", sig.source)
    }
    issue_signatures = [s for s in signatures() if "https://github.com/" in s.source]
    assert len(issue_signatures) >= 12
    assert len(urls) >= 12


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
    }
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
    template = "delete {pool} in {zone}; keep {\"data\":1} and '{.spec.x}' and {unknown}"
    out = fill(template, {"pool": "np-1", "zone": None})
    assert out == "delete np-1 in <zone>; keep {\"data\":1} and '{.spec.x}' and {unknown}"


def test_unit_clean_line_strips_ansi_and_line_endings() -> None:
    assert clean_line("\x1b[33m(raylet)\x1b[0m hello\r\n") == "(raylet) hello"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("151.15G", 151.15 * 2**30), ("31.06M", 31.06 * 2**20), ("1.5GiB", 1.5 * 2**30), ("x", None)],
)
def test_unit_parse_size(text: str, expected: float | None) -> None:
    assert parse_size(text) == expected


# ---------------------------------------------------------------------------------------------
# The command, through a Typer app of its own (the real one registers it as `diagnose`)
# ---------------------------------------------------------------------------------------------


def make_app() -> typer.Typer:
    app = typer.Typer()
    app.command()(diagnose_command)
    return app


runner = CliRunner()


def test_cli_fatal_log_exits_1_and_shows_the_fix() -> None:
    result = runner.invoke(
        make_app(), [str(LOGS / "maxtext_aot_hbm_oom.log")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1, result.output
    assert "hbm-oom-compile" in result.output
    assert "151.15G" in result.output


def test_cli_clean_log_exits_0() -> None:
    result = runner.invoke(make_app(), [str(LOGS / "maxtext_cpu_clean.log")])
    assert result.exit_code == 0, result.output
    assert "No known error in 23 lines" in result.output


def test_cli_warnings_only_exit_0() -> None:
    text = "W tensorflow] Allocation of 414988800 exceeds 10% of free system memory.\n"
    result = runner.invoke(make_app(), ["-", "--json"], input=text)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [m["signature"] for m in doc["matches"]] == ["host-allocation-warning"]


def test_cli_json_from_stdin_follows_the_contract() -> None:
    text = (LOGS / "maxtext_weight_decay.log").read_text(encoding="utf-8")
    result = runner.invoke(make_app(), ["-", "--json"], input=text)
    assert result.exit_code == 1
    doc = json.loads(result.output)
    assert doc["log"] == "standard input"
    assert doc["lines"] == len(text.splitlines())
    (item,) = doc["matches"]
    assert {"family", "line", "extracted", "cause", "fix", "source"} <= set(item)
    assert item["family"] == "training-config"
    assert item["extracted"]["key"] == "weight_decay"
    assert item["signature"] == "maxtext-unknown-key"
    assert "muon_weight_decay" in item["fix"]


def test_cli_reads_gzip_logs(tmp_path: Path) -> None:
    path = tmp_path / "run.log.gz"
    with gzip.open(path, "wt", encoding="utf-8") as gz:
        gz.write((LOGS / "almodel_stop_iteration.log").read_text(encoding="utf-8"))
    result = runner.invoke(make_app(), [str(path), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["matches"][0]["signature"] == "data-exhausted"


def test_cli_missing_file_is_an_input_error_with_a_fix(tmp_path: Path) -> None:
    result = runner.invoke(make_app(), [str(tmp_path / "nope.log")])
    assert isinstance(result.exception, InputError)
    assert "does not exist" in result.exception.message
    assert "tpu-trainer diagnose -" in result.exception.fix
    assert result.exception.exit_code == 2


def test_cli_directory_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        diagnose_command(str(tmp_path))


def test_cli_direct_call_prints_json_and_raises_exit_on_fatal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as exit_info:
        diagnose_command(str(LOGS / "gke_events.log"), as_json=True)
    assert exit_info.value.exit_code == 1
    doc = json.loads(capsys.readouterr().out)
    assert "kueue-preempted" in [item["signature"] for item in doc["matches"]]


def test_cli_direct_call_on_clean_log_returns(capsys: pytest.CaptureFixture[str]) -> None:
    diagnose_command(str(LOGS / "maxtext_cpu_clean.log"), as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert doc["matches"] == [] and doc["lines"] == 23
