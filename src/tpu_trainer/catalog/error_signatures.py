"""Known errors of TPU training runs, as data: signature → cause → the fix.

One :class:`Signature` per failure a user meets on the way from a recipe to a training step:
MaxText configuration and sharding errors, XLA out-of-memory, the TPU runtime, GKE scheduling,
Kueue admission, JobSet, xpk, gcloud node pools and reservations, Cloud Storage, and the
TPU VM, Ray, Tunix and PyTorch/XLA launch paths.

``cause`` and ``fix`` may name the pattern's named groups as ``{group}`` (and the extra values
a signature's ``derive`` computes from them); ``tpu_trainer.plan.diagnose`` fills them in. A
group that did not take part in the match is shown as ``<group>``, the placeholder style of the
other fixes.

``source`` says where the signature comes from: a seed document (``seed 000`` is the TPU v7
automation guide, ``seed 001`` the ALModel training record, ``seed 002`` the Tunix guide,
``seed 003`` Ray on GKE, ``seed 004`` Transformers on TPU, ``facts`` the checked-facts file),
or the public issue where users met the error.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

Severity = Literal["fatal", "warning"]
Derive = Callable[[Mapping[str, str]], dict[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    """One known error: how to recognise it in a log line, why it happens, what fixes it."""

    id: str
    """Stable name, used in ``--json`` output and for de-duplication."""
    pattern: re.Pattern[str]
    """Searched in every log line (and in a line joined to the one before it)."""
    needles: tuple[str, ...]
    """Lower-case texts, one of which every match contains: lines with none of them are
    skipped without running ``pattern`` (this keeps a scan of a long log fast)."""
    title: str
    """A few words for tables."""
    cause: str
    """Why it happens."""
    fix: str
    """The command or setting that fixes it; may name groups as ``{group}``."""
    severity: Severity = "fatal"
    """``fatal`` when the run cannot succeed, ``warning`` when it may still."""
    source: str
    """Where it is documented: a seed document or a public issue URL."""
    derive: Derive | None = None
    """Extra ``{placeholders}`` computed from the named groups (ratios, suggestions)."""


SEED_000 = "seed 000 (TPU v7 training automation: troubleshooting)"
SEED_001 = "seed 001 (ALModel 8B on TPU v7: pitfalls)"
SEED_002 = "seed 002 (Tunix GRPO on a v6e TPU VM)"
SEED_003 = "seed 003 (MaxText with Ray Train on KubeRay)"
SEED_004 = "seed 004 (Transformers on TPU with PyTorch/XLA)"
FACTS = "shared design/FACTS.md (checked facts)"

# ---------------------------------------------------------------------------------------------
# Helpers that compute extra placeholders (pure; used through Signature.derive)
# ---------------------------------------------------------------------------------------------

_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"([\d.]+)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


def parse_size(text: str) -> float | None:
    """Bytes in a size as XLA prints it (``151.15G``, ``31.06M``, ``1.5GiB``), else None."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        return None
    try:
        return float(m.group(1)) * _UNIT[m.group(2).upper()]
    except ValueError:
        return None


def _memory_ratio(groups: Mapping[str, str]) -> dict[str, str]:
    """``ratio``: needed ÷ available, and ``over``: how much does not fit, in GiB."""
    needed = parse_size(groups.get("needed", ""))
    available = parse_size(groups.get("available", ""))
    if not needed or not available:
        return {}
    over = (needed - available) / 2**30
    verdict = f"{over:.2f}G too much" if over > 0 else "it should fit: free memory is fragmented"
    return {"ratio": f"{needed / available:.2f}", "over": verdict}


def _sharding_split(groups: Mapping[str, str]) -> dict[str, str]:
    """How to split ``parts`` devices so FSDP divides ``size``: ``fsdp`` × ``data``."""
    try:
        parts, size = int(groups["parts"]), int(groups["size"])
    except (KeyError, ValueError):
        return {}
    fsdp = math.gcd(parts, size) or 1
    shape = groups.get("shape")
    return {
        "fsdp": str(fsdp),
        "data": str(max(parts // fsdp, 1)),
        "shape_note": f" (full shape {shape})" if shape else "",
    }


# MaxText 0.2.5 builds its logical mesh in this order (checked against its AOT logs: fsdp is
# index 3, tensor index 8); older releases had no ``diloco`` axis, so their indices are one less.
MESH_AXES = (
    "diloco",
    "data",
    "stage",
    "fsdp",
    "fsdp_transpose",
    "sequence",
    "context",
    "context_autoregressive",
    "tensor",
    "tensor_transpose",
    "tensor_sequence",
    "expert",
)


def _mesh_axis(groups: Mapping[str, str]) -> dict[str, str]:
    """Names of the logical axis ``axis`` in 0.2.5's mesh order and in the older one."""
    try:
        index = int(groups["axis"])
    except (KeyError, ValueError):
        return {}
    new = MESH_AXES[index] if 0 <= index < len(MESH_AXES) else "?"
    old = MESH_AXES[index + 1] if 0 <= index + 1 < len(MESH_AXES) else "?"
    return {"axis_name": new, "old_axis_name": old}


# Keys people pass that MaxText spells differently. Exact renames win over fuzzy matching.
KEY_RENAMES: Mapping[str, tuple[str, ...]] = {
    "weight_decay": ("adam_weight_decay", "muon_weight_decay"),
    "batch_size": ("per_device_batch_size",),
    "seq_len": ("max_target_length",),
    "seq_length": ("max_target_length",),
    "max_seq_len": ("max_target_length",),
    "max_steps": ("steps",),
    "num_steps": ("steps",),
    "train_steps": ("steps",),
    "lr": ("learning_rate",),
    "optimizer": ("opt_type",),
    "model": ("model_name",),
    "output_dir": ("base_output_directory",),
    "warmup_steps": ("warmup_steps_fraction",),
    "grad_clip": ("gradient_clipping_threshold",),
    "max_grad_norm": ("gradient_clipping_threshold",),
    "fsdp": ("ici_fsdp_parallelism",),
    "tensor_parallelism": ("ici_tensor_parallelism",),
    "tokenizer": ("tokenizer_path",),
    "dataset": ("dataset_type", "dataset_path"),
    "remat": ("remat_policy",),
    "save_period": ("checkpoint_period",),
    "eval_every": ("eval_interval",),
}

# A small list of MaxText keys recipes and users set most (all present in 0.2.5's base.yml).
COMMON_MAXTEXT_KEYS = (
    "run_name",
    "model_name",
    "base_output_directory",
    "hardware",
    "steps",
    "log_period",
    "per_device_batch_size",
    "max_target_length",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_schedule_type",
    "warmup_steps_fraction",
    "learning_rate_schedule_steps",
    "opt_type",
    "adam_b1",
    "adam_b2",
    "adam_eps",
    "adam_weight_decay",
    "muon_weight_decay",
    "muon_beta",
    "mu_dtype",
    "gradient_clipping_threshold",
    "dtype",
    "weight_dtype",
    "remat_policy",
    "decoder_layer_input",
    "scan_layers",
    "attention",
    "quantization",
    "use_qwix_quantization",
    "dataset_type",
    "dataset_path",
    "tokenizer_path",
    "tokenizer_type",
    "train_split",
    "hf_path",
    "packing",
    "num_epoch",
    "enable_data_shuffling",
    "grain_worker_count",
    "enable_checkpointing",
    "async_checkpointing",
    "checkpoint_period",
    "max_num_checkpoints_to_keep",
    "load_parameters_path",
    "load_full_state_path",
    "eval_interval",
    "eval_steps",
    "profiler",
    "profiler_steps",
    "skip_first_n_steps_for_profiler",
    "ici_data_parallelism",
    "ici_fsdp_parallelism",
    "ici_fsdp_transpose_parallelism",
    "ici_tensor_parallelism",
    "ici_context_parallelism",
    "ici_sequence_parallelism",
    "ici_expert_parallelism",
    "ici_pipeline_parallelism",
    "dcn_data_parallelism",
    "dcn_fsdp_parallelism",
    "dcn_pipeline_parallelism",
    "num_slices",
    "allow_split_physical_axes",
    "compile_topology",
    "compile_topology_num_slices",
    "skip_jax_distributed_system",
    "override_model_config",
    "base_emb_dim",
    "base_mlp_dim",
    "base_num_decoder_layers",
    "base_num_query_heads",
    "base_num_kv_heads",
    "head_dim",
    "vocab_size",
    "num_experts",
    "num_experts_per_tok",
    "capacity_factor",
    "sparse_matmul",
    "megablox",
    "optimizer_memory_host_offload",
    "parameter_memory_host_offload",
)

_QUOTED_KEY = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def suggest_keys(key: str, valid: tuple[str, ...] = COMMON_MAXTEXT_KEYS) -> tuple[str, ...]:
    """MaxText keys the user probably meant by ``key``: known renames, else close spellings."""
    renamed = KEY_RENAMES.get(key) or KEY_RENAMES.get(key.lower())
    if renamed:
        return renamed
    return tuple(difflib.get_close_matches(key, valid, n=3, cutoff=0.6))


def _key_suggestion(groups: Mapping[str, str]) -> dict[str, str]:
    """``suggestion``: what to write instead of the unknown ``key``.

    When the error line lists the valid fields (MaxText ≥ 0.2 does), they are the candidates;
    otherwise :data:`COMMON_MAXTEXT_KEYS`.
    """
    key = groups.get("key", "")
    listed = tuple(dict.fromkeys(_QUOTED_KEY.findall(groups.get("valid") or "")))
    valid = tuple(k for k in listed if k != key) or COMMON_MAXTEXT_KEYS
    found = suggest_keys(key, valid)
    if key == "weight_decay":
        text = "`adam_weight_decay=<v>` (AdamW) and, with opt_type=muon, `muon_weight_decay=<v>`"
    elif found:
        text = " or ".join(f"`{k}=`" for k in found)
    else:
        text = "a key of maxtext/configs/base.yml (no close match found)"
    return {"suggestion": text}


def _first_container(groups: Mapping[str, str]) -> dict[str, str]:
    names = (groups.get("containers") or "").split()
    return {"container": names[0] if names else "jax-tpu-1"}


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

_MAXTEXT_AND_XLA: tuple[Signature, ...] = (
    Signature(
        id="fsdp-indivisible",
        needles=("is partitioned",),
        pattern=re.compile(
            r"implies that array axis (?P<dim>\d+) is partitioned (?P<parts>\d+) times, "
            r"but the dimension size is (?P<size>\d+)(?: \(full shape: (?P<shape>\([^)]*\)))?"
        ),
        title="Sharding does not divide a tensor dimension",
        cause="The FSDP sharding (ici_fsdp × ici_fsdp_transpose, times DCN FSDP) splits a "
        "tensor axis into more parts than its size allows, e.g. more than 512 devices of FSDP "
        "on DeepSeek3-671B, whose smallest sharded dimension is 512.",
        fix="{parts} shards cannot split axis {dim} of size {size}{shape_note}. Keep "
        "ici_fsdp_parallelism × ici_fsdp_transpose_parallelism at a divisor of {size} "
        "(here {fsdp}) and give the other devices to data parallelism: "
        "ici_data_parallelism={data} (costs per-chip throughput), or use more slices with "
        "dcn_data_parallelism so each slice stays within the limit.",
        source=SEED_000 + "; " + FACTS,
        derive=_sharding_split,
    ),
    Signature(
        id="fsdp-indivisible-legacy",
        needles=("should be divisible by",),
        pattern=re.compile(
            r"size of its dimension (?P<dim>\d+) should be divisible by (?P<parts>\d+),?\s*"
            r"but it is equal to (?P<size>\d+)(?: \(full shape: (?P<shape>\([^)]*\)))?"
        ),
        title="Sharding does not divide a tensor dimension",
        cause="Older JAX's wording of the same problem: the FSDP product of the mesh exceeds "
        "(or does not divide) a tensor dimension.",
        fix="{parts}-way sharding cannot split dimension {dim} of size {size}{shape_note}. "
        "Check ici_fsdp_parallelism × ici_fsdp_transpose_parallelism: keep it at a divisor of "
        "{size} (here {fsdp}) and move the rest to ici_data_parallelism={data}, or go "
        "multi-slice with dcn_data_parallelism.",
        source=SEED_000,
        derive=_sharding_split,
    ),
    Signature(
        id="mesh-assignment",
        needles=("logical_axis_index",),
        pattern=re.compile(
            r"Failed to find assignment for logical_axis_index (?P<axis>\d+) of size "
            r"(?P<size>\d+)(?: with remaining assignable mesh (?P<mesh>\[[^\]]*\]))?"
        ),
        title="Logical mesh does not fit the physical TPU mesh",
        cause="Each ici_* parallelism must equal a product of some physical mesh axes; after "
        "the other axes took theirs, no whole axis of the needed size was left.",
        fix="Axis {axis} (size {size}) found only {mesh} left. In MaxText 0.2.5's mesh order it "
        "is `{axis_name}` (older releases: `{old_axis_name}`). Choose ici_* values that are "
        "products of physical axes, e.g. on 2x4x4 (mesh [2, 4, 4, 2]) use ici_fsdp=16 "
        "ici_tensor=4 ici_context=1 instead of fsdp=8 tensor=4 context=2, or set "
        "allow_split_physical_axes=true. Check offline with MaxText's train_compile and "
        "compile_topology=<device-type>.",
        source=SEED_001 + "; " + FACTS,
        derive=_mesh_axis,
    ),
    Signature(
        id="hbm-oom-compile",
        needles=("ran out of memory on hbm",),
        pattern=re.compile(
            r"Ran out of memory on HBM, the total memory required for (?P<what>[^(]+?) "
            r"\((?P<needed>[\d.]+ ?[KMGT]?i?B?)\) exceeds available HBM "
            r"\((?P<available>[\d.]+ ?[KMGT]?i?B?)\)"
        ),
        title="Out of HBM at compile time",
        cause="XLA's memory plan for one device does not fit its HBM (on TPU v7 a JAX device is "
        "one TensorCore with ~94.75G, half a chip's 192 GB).",
        fix="Needs {needed} per device, {available} available ({ratio}×, {over}). Lower "
        "per_device_batch_size or max_target_length, use remat_policy=full or offload "
        "(decoder_layer_input=offload, optimizer_memory_host_offload=true), shard more "
        "(raise ici_fsdp_parallelism), or use a bigger slice. Check the fit offline with "
        "MaxText's train_compile and compile_topology=<device-type>.",
        source=SEED_001 + "; https://openxla.org/xla/errors/error_1000",
        derive=_memory_ratio,
    ),
    Signature(
        id="hbm-oom-legacy",
        needles=("memory space hbm",),
        pattern=re.compile(
            r"Ran out of memory in memory space hbm\. Used (?P<needed>[\d.]+ ?[KMGT]?i?B?) "
            r"of (?P<available>[\d.]+ ?[KMGT]?i?B?) hbm"
        ),
        title="Out of HBM at compile time",
        cause="Older XLA's wording: the compiled program needs more HBM than a device has.",
        fix="Uses {needed} of {available} ({ratio}×, {over}). Lower per_device_batch_size or "
        "max_target_length, use remat_policy=full or host offload, or shard more "
        "(ici_fsdp_parallelism).",
        source="https://github.com/pytorch/xla/issues/9524",
        derive=_memory_ratio,
    ),
    Signature(
        id="vmem-oom",
        needles=("memory space vmem",),
        pattern=re.compile(
            r"Ran out of memory in memory space vmem(?:\. Used (?P<needed>[\d.]+ ?[KMGT]?i?B?) "
            r"of (?P<available>[\d.]+ ?[KMGT]?i?B?) vmem)?"
        ),
        title="Out of on-chip vector memory (VMEM)",
        cause="A kernel's tiles do not fit the TensorCore's small VMEM; HBM is not the problem.",
        fix="Uses {needed} of {available} VMEM. Lower the kernel block sizes (MaxText: "
        "sa_block_q / sa_block_kv and the wi_/wo_tile_* settings from the recipe), or use "
        "another attention kernel (attention=dot_product to test).",
        source="https://github.com/pytorch/xla/issues/9524",
    ),
    Signature(
        id="hbm-oom-runtime",
        needles=("attempting to allocate", "attempting to reserve"),
        pattern=re.compile(
            r"Attempting to (?:allocate|reserve) (?P<needed>[\d.]+ ?[KMGT]?i?B?)\.?"
            r"(?: That was not possible\.)? (?:There are|Only) "
            r"(?P<available>[\d.]+ ?[KMGT]?i?B?) free"
        ),
        title="Out of HBM while running",
        cause="A buffer could not be allocated on the device at run time: the batch, the "
        "generations (RL), a cache or fragmentation exceed what is free.",
        fix="Wanted {needed}, {available} free ({ratio}×, {over}). Lower the batch "
        "(per_device_batch_size; Tunix: batch_size=1 and grpo_config.num_generations=4), the "
        "sequence length or the KV cache, or shard more.",
        source=SEED_002 + "; https://github.com/google/trax/issues/431",
        derive=_memory_ratio,
    ),
    Signature(
        id="data-exhausted",
        needles=("stopiteration", "end of sequence"),
        pattern=re.compile(r"\bStopIteration\b|OutOfRangeError: End of sequence"),
        title="Training data ran out",
        cause="The input pipeline had fewer examples than steps × global batch; the run stopped "
        "early with exit code 1 (the steps before it completed).",
        fix="Give at least min_lines ≈ steps × devices × per_device_batch_size × "
        "max_target_length / tokens_per_line lines (e.g. 10 × 64 × 1 × 4096 = 2,621,440 "
        "tokens), lower steps=, or use dataset_type=synthetic for a smoke test.",
        source=SEED_001,
    ),
    Signature(
        id="maxtext-unknown-key",
        needles=("not in valid fields", "not in '"),
        pattern=re.compile(
            r"'?(?P<key>[A-Za-z_][A-Za-z0-9_.]*)'? not in (?:valid fields|(?P<valid>'.*))"
        ),
        title="Unknown MaxText configuration key",
        cause="MaxText rejects keys it does not know (banner `MAXTEXT CONFIG ERROR`, exit 1).",
        fix="Replace `{key}=` with {suggestion}. Overriding a key of the model's own config "
        "also needs override_model_config=true.",
        source=SEED_001 + "; " + FACTS,
        derive=_key_suggestion,
    ),
    Signature(
        id="cpu-run-distributed",
        needles=("job_index",),
        pattern=re.compile(
            r"TypeError.*JOB_INDEX|JOB_INDEX.*(?:TypeError|NoneType)|KeyError: '?JOB_INDEX"
            r"|environ(?:\.get)?\(\s*['\"]JOB_INDEX"
        ),
        title="CPU run tried to start JAX's distributed system",
        cause="MaxText initialises jax.distributed from the GKE/xpk job environment (JOB_INDEX), "
        "which a local CPU run does not have.",
        fix="Add `hardware=cpu skip_jax_distributed_system=true` to the MaxText command.",
        source=FACTS,
    ),
    Signature(
        id="optax-consistent-rms",
        needles=("consistent_rms",),
        pattern=re.compile(r"unexpected keyword argument '(?P<arg>consistent_rms)'"),
        title="optax too old for the Muon options",
        cause="The container's optax has a muon() without `consistent_rms`, but the training "
        "code passes it.",
        fix="Upgrade optax in the image (`pip install -U optax`), or pass it only where "
        "supported: `if 'consistent_rms' in inspect.signature(muon).parameters: ...`.",
        source=SEED_001,
    ),
    Signature(
        id="jax-non-addressable",
        needles=("non-addressable",),
        pattern=re.compile(r"non-addressable (?:\(non process local\) )?devices"),
        title="Host code read a global multi-host array",
        cause="On a multi-host slice each process holds only its own shards; reading a global "
        "array on one host (or running on one host only) fails.",
        fix="Gather first with `jax.experimental.multihost_utils.process_allgather(x, "
        "tiled=True)`, build inputs with `jax.make_array_from_process_local_data`, and run "
        "the same program on every host (`gcloud compute tpus tpu-vm ssh <tpu> --worker=all "
        "--command=...`).",
        source=SEED_002,
    ),
)

_TPU_RUNTIME: tuple[Signature, ...] = (
    Signature(
        id="tpu-vm-runtime-version",
        needles=("global tpu topology",),
        pattern=re.compile(r"Failed to get global TPU topology"),
        title="TPU VM has the wrong runtime image",
        cause="The TPU VM was created with a runtime version that does not match its TPU "
        "(e.g. tpu-ubuntu2204-base on v6e), so JAX cannot see the topology.",
        fix="Delete and recreate it with the family's runtime: `gcloud compute tpus tpu-vm "
        "delete <tpu> --zone=<zone> --quiet`, then `gcloud compute tpus tpu-vm create <tpu> "
        "--zone=<zone> --accelerator-type=<type> --version=v2-alpha-tpuv6e` (v5p: "
        "v2-alpha-tpuv5, v5e: v2-alpha-tpuv5-lite; `tpu-trainer slice <type>` shows it).",
        source=SEED_002 + "; " + FACTS,
    ),
    Signature(
        id="libtpu-in-use",
        needles=("already in use by",),
        pattern=re.compile(
            r"(?:The TPU is|libtpu\.so) already in use by "
            r"(?:another process|(?:a )?process with pid (?P<pid>\d+))"
        ),
        title="Another process holds the TPU",
        cause="libtpu lets one process per host open the chips; a previous run, a notebook or a "
        "parallel AOT compile still holds them.",
        fix="Find and stop it (`sudo lsof -w /dev/accel*`; `kill {pid}`), run AOT compiles one "
        "at a time (or ALLOW_MULTIPLE_LIBTPU_LOAD=1 for compile-only jobs), and remove a "
        "stale /tmp/libtpu_lockfile left by a crashed process.",
        source="https://github.com/sgl-project/sglang-jax/issues/857",
    ),
    Signature(
        id="tpu-device-permission",
        needles=("/dev/accel", "/dev/vfio"),
        pattern=re.compile(
            r"(?:open\(|Couldn't open device: )/dev/(?P<dev>accel\d+|vfio/\d+)"
            r"(?:\)?: (?P<why>Operation not permitted|Permission denied|Device or resource busy))?"
        ),
        title="Cannot open the TPU device",
        cause="The process may not open /dev/{dev}: the container is not allowed to, or "
        "another process still has the device.",
        fix="On GKE request the chips through `resources.limits: google.com/tpu` (older GKE "
        "versions also need `securityContext: privileged: true`); on a TPU VM stop the other "
        "process using /dev/{dev} (`sudo lsof -w /dev/{dev}`).",
        source="https://github.com/marin-community/levanter/pull/1127",
    ),
    Signature(
        id="tpu-worker-addresses",
        needles=("slice_builder_worker_addresses",),
        pattern=re.compile(
            r"slice_builder_worker_addresses specified\. Expected (?P<expected>\d+) worker "
            r"addresses, got (?P<got>\d+)"
        ),
        title="Multi-host slice started on too few hosts",
        cause="The slice has {expected} hosts but the runtime was told about {got}.",
        fix="Run the program on every worker at once (`gcloud compute tpus tpu-vm ssh <tpu> "
        "--worker=all --command=...`; on GKE one pod per host, as xpk does), and do not "
        "override TPU_WORKER_HOSTNAMES / TPU_PROCESS_ADDRESSES by hand.",
        source="https://github.com/Lightning-AI/pytorch-lightning/issues/20244",
    ),
    Signature(
        id="tpu-init-slow",
        needles=("tpu backend initialization is taking",),
        pattern=re.compile(
            r"TPU backend initialization is taking more than (?P<secs>[\d.]+) seconds"
        ),
        title="TPU backend waits for other hosts",
        cause="On a multi-host slice every host must start the program; some have not.",
        fix="Start the same command on all workers (`--worker=all`), and check that every pod "
        "of the JobSet is Running (`kubectl get pods -l jobset.sigs.k8s.io/jobset-name=<workload>`).",
        severity="warning",
        source="https://github.com/jax-ml/jax/issues/19971",
    ),
    Signature(
        id="jax-barrier-timeout",
        needles=("barrier timed out",),
        pattern=re.compile(
            r"DEADLINE_EXCEEDED: Barrier timed out\.?(?: (?:Barrier_id|Id): (?P<barrier>[\w.-]+))?"
        ),
        title="Hosts did not all reach a JAX barrier",
        cause="jax.distributed waited for every process, but some never arrived: a pod was not "
        "scheduled, crashed early, or started much later.",
        fix="Look at the first failing worker's log (`kubectl logs <pod> -c jax-tpu-1` for each "
        "pod), make sure all pods were Running together, and for slow starts raise "
        "JAX_COORDINATION_SERVICE_HEARTBEAT_TIMEOUT_SECONDS.",
        source="https://github.com/marin-community/levanter/issues/432",
    ),
    Signature(
        id="megascale-deadline",
        needles=("deadline_exceeded", "deadline exceeded", "heartbeat"),
        pattern=re.compile(
            r"(?:megascale|\bdcn\b)[^\n]*deadline[_ ]exceeded|deadline[_ ]exceeded[^\n]*"
            r"(?:megascale|\bdcn\b|heartbeat)|\bheartbeat (?:timeout|timed out)|missing heartbeats?",
            re.IGNORECASE,
        ),
        title="Multi-slice (DCN) communication timed out",
        cause="Slices talk over the data-centre network through MegaScale gRPC; a slow compile, "
        "a missing second network or an unhealthy slice makes a peer miss its deadline.",
        fix="Check the cluster's multi-slice prerequisites (multi-networking, "
        "`--megascale_grpc_interface_prefixes=eth1,eth2,lo` in LIBTPU_INIT_ARGS), raise "
        "JAX_COORDINATION_SERVICE_HEARTBEAT_TIMEOUT_SECONDS for long compiles, and add "
        "`--megascale_abort_on_hangs=true` so a hang ends the job instead of stalling.",
        source="https://github.com/GoogleCloudPlatform/ml-auto-solutions/pull/1166",
    ),
    Signature(
        id="host-oom-killed",
        needles=("oomkilled", "137"),
        pattern=re.compile(r"\bOOMKilled\b|exit(?:ed)? (?:with )?(?:code|status):? 137\b", re.I),
        title="Container killed for host memory",
        cause="The host (CPU) memory of the pod ran out: data loading, checkpoint restore or "
        "host offload used more than the container may.",
        fix="Raise the container's memory limit (or drop it on a dedicated TPU node), lower "
        "host-side buffering (grain_worker_count, prefetch), and see `kubectl describe pod "
        "<pod>` for the OOMKilled reason.",
        source="https://github.com/tensorflow/tensorflow/issues/33960",
    ),
    Signature(
        id="host-allocation-warning",
        needles=("exceeds 10% of",),
        pattern=re.compile(r"Allocation of (?P<bytes>\d+) exceeds 10% of (?:free )?system memory"),
        title="Large host allocation (warning)",
        cause="TensorFlow (the data pipeline) allocated a large host buffer; harmless unless "
        "the pod is later OOMKilled.",
        fix="Nothing if training proceeds; if the host runs out, lower the data pipeline's "
        "buffering or the per-host batch.",
        severity="warning",
        source="https://github.com/NatLibFi/Annif/issues/427",
    ),
)

_LAUNCH_PATHS: tuple[Signature, ...] = (
    Signature(
        id="xla-spawn-nprocs",
        needles=("unsupported nprocs",),
        pattern=re.compile(r"Unsupported nprocs \((?P<n>\d+)\)"),
        title="torch_xla spawn with an explicit process count",
        cause="PyTorch/XLA runs one process per device by itself; nprocs other than None or 1 "
        "is not supported (xla_spawn.py --num_cores=8).",
        fix="Drop xla_spawn.py / nprocs={n}: run the script directly with SPMD FSDPv2 "
        '(PJRT_DEVICE=TPU, `fsdp_config={"xla": True, "xla_fsdp_v2": True}`), the same '
        "command on every worker.",
        source=SEED_004 + "; https://github.com/pytorch/xla/issues/8215",
    ),
    Signature(
        id="tunix-section-override",
        needles=("eval_every_n_steps",),
        pattern=re.compile(r"missing [^\n]*'(?P<arg>eval_every_n_steps)'"),
        title="Tunix dotted override replaced a whole section",
        cause="A dotted override such as rl_training_config.max_steps=10 replaces the whole "
        "section, so its other keys ({arg} among them) are missing.",
        fix="Pass the complete section (every key of rl_training_config) in the override file, "
        "or repeat all of its keys on the command line.",
        source=FACTS + "; " + SEED_002,
    ),
    Signature(
        id="ray-tpu-head",
        needles=("failed to reserve tpu head",),
        pattern=re.compile(
            r"Failed to reserve TPU head for slice(?: with shape:? (?P<shape>[\w.-]+))?"
        ),
        title="Ray cannot reserve a TPU slice",
        cause="No TPU slice of that shape is free in the RayCluster; Ray retries forever.",
        fix="Check the RayCluster's TPU worker group (numOfHosts, topology) and its node pool "
        "(`kubectl get nodes -l cloud.google.com/gke-tpu-topology`), stop the job (`ray job "
        "stop <id>`) and keep your own deadline.",
        source=FACTS + "; https://github.com/AI-Hypercomputer/ray-tpu/issues/17",
    ),
)

_GKE_AND_KUEUE: tuple[Signature, ...] = (
    Signature(
        id="xpk-configmap-missing",
        needles=("workload scheduling validation failed",),
        pattern=re.compile(r"Workload scheduling validation failed"),
        title="xpk's resources configmap lacks the device type",
        cause="xpk checks `<cluster>-resources-configmap` before submitting; the entry for this "
        "device type (hosts × slices) is missing.",
        fix="`kubectl patch configmap <cluster>-resources-configmap --type merge -p "
        '\'{"data":{"<device-type>":"<hosts>"}}\'` (e.g. tpu7x-256: "32"; '
        "`tpu-trainer slice <device-type>` prints the entry).",
        source=SEED_000,
    ),
    Signature(
        id="kueue-tpu-quota",
        needles=("quota for",),
        pattern=re.compile(
            r"insufficient (?:unused )?quota for (?P<resource>[\w./-]+) in flavor "
            r"(?P<flavor>[\w.-]+)"
        ),
        title="Kueue quota too small for the slice",
        cause="The ClusterQueue's nominalQuota of {resource} in flavor {flavor} is below what "
        "the workload asks for (or is in use by other workloads).",
        fix="Raise nominalQuota for {resource} in flavor {flavor} to the slice's chips × slices "
        "(`kubectl edit clusterqueue cluster-queue`; `tpu-trainer slice <device-type>` prints "
        "kueue_quota), or wait for running workloads (`kubectl get workloads -A`).",
        source="https://github.com/kubernetes-sigs/kueue/issues/3909",
    ),
    Signature(
        id="kueue-cpu-memory-quota",
        needles=("unavailable in clusterqueue",),
        pattern=re.compile(r"resource (?P<resource>cpu|memory) unavailable in ClusterQueue"),
        title="ClusterQueue lacks CPU or memory quota",
        cause="The ClusterQueue covers {resource} (xpk's --cpu-limit / --memory-limit, or the "
        "memory_limit bug of cluster adapt) but the pods request more than its quota.",
        fix="Remove {resource} from the ClusterQueue's coveredResources or raise its "
        "nominalQuota (`kubectl edit clusterqueue cluster-queue`).",
        source="https://github.com/AI-Hypercomputer/xpk/issues/603",
    ),
    Signature(
        id="kueue-flavor",
        needles=("couldn't assign flavors", "doesn't match"),
        pattern=re.compile(
            r"couldn't assign flavors to pod set (?P<podset>[\w.-]+)"
            r"(?![^\n]*(?:insufficient (?:unused )?quota|resource (?:cpu|memory) unavailable))"
            r"|flavor (?:(?P<flavor>[\w.-]+) )?doesn't match"
        ),
        title="Kueue has no matching ResourceFlavor",
        cause="Kueue cannot admit the workload: no ResourceFlavor for this TPU type and "
        "topology, or the ClusterQueue does not list it.",
        fix="Create ResourceFlavor `1xtpu7x-<devices>` (nodeLabels "
        "cloud.google.com/gke-tpu-accelerator and cloud.google.com/gke-tpu-topology) and add it "
        "to ClusterQueue cluster-queue with nominalQuota google.com/tpu = chips; `tpu-trainer "
        "preflight <recipe> --fix` does both. Check with `kubectl get resourceflavor`.",
        source=SEED_000,
    ),
    Signature(
        id="kueue-preempted",
        needles=("preempted to accommodate",),
        pattern=re.compile(r"Preempted to accommodate a workload(?: \(UID: (?P<uid>[^,)]+))?"),
        title="Workload preempted by a higher-priority one",
        cause="Kueue evicted this workload to admit workload {uid} of higher priority.",
        fix="Resubmit with a higher priority (`xpk workload create ... --priority=very-high`), "
        "or ask for more quota; see who runs with `kubectl get workloads -A`.",
        source="https://github.com/kubernetes-sigs/kueue/issues/3909",
    ),
    Signature(
        id="jobset-max-restarts",
        needles=("max number of restarts", "reachedmaxrestarts"),
        pattern=re.compile(
            r"jobset failed due to reaching max number of restarts|ReachedMaxRestarts"
        ),
        title="JobSet gave up after its restarts",
        cause="Every restart allowed by the failure policy (xpk --max-restarts) failed again.",
        fix="Read the first failure in the pod logs (`tpu-trainer diagnose` on them); xpk "
        "restarts only on exit codes 42 and 127-255, so fix the error instead of raising "
        "--max-restarts.",
        source="https://github.com/kubernetes-sigs/jobset/pull/96",
    ),
    Signature(
        id="jobset-failed-jobs",
        needles=("one or more job failures",),
        pattern=re.compile(r"jobset failed due to one or more job failures"),
        title="A job of the JobSet failed",
        cause="A worker pod exited with an error and the JobSet has no restarts left.",
        fix="Find the failing pod (`kubectl get pods -l jobset.sigs.k8s.io/jobset-name=<workload>`) "
        "and diagnose its log (`kubectl logs <pod> -c jax-tpu-1 | tpu-trainer diagnose -`).",
        source="https://github.com/kubernetes-sigs/jobset/pull/381",
    ),
    Signature(
        id="image-pull",
        needles=("imagepullbackoff", "errimagepull", "failed to pull image"),
        pattern=re.compile(
            r"(?P<state>ImagePullBackOff|ErrImagePull)|Failed to pull image \"(?P<image>[^\"]+)\""
        ),
        title="Container image cannot be pulled",
        cause="The image name or tag does not exist, or the nodes' service account may not "
        "read the registry.",
        fix="Check the image exists (`docker manifest inspect {image}` / `gcloud artifacts "
        "docker images list <repo>`) and grant the node service account "
        "roles/artifactregistry.reader on the repository.",
        source="https://github.com/kubeflow/trainer/issues/2001",
    ),
    Signature(
        id="insufficient-tpu",
        needles=("insufficient google.com/tpu",),
        pattern=re.compile(r"(?P<n>\d+) Insufficient google\.com/tpu"),
        title="No free TPU nodes for the pods",
        cause="No node has free google.com/tpu chips: the node pool is missing, not RUNNING, "
        "too small, or busy with another workload.",
        fix="`gcloud container node-pools list --cluster=<cluster> --region=<region>` (status "
        "RUNNING, node count = hosts), `kubectl get nodes -l "
        "cloud.google.com/gke-tpu-topology=<topology>`, and delete finished workloads that "
        "still hold the chips.",
        source="https://github.com/kubeflow/kubeflow/issues/1262",
    ),
    Signature(
        id="node-affinity-mismatch",
        needles=("didn't match",),
        pattern=re.compile(
            r"(?P<n>\d+) node\(s\) didn't match (?:Pod's node affinity/selector|node selector)"
        ),
        title="No node has the labels the pods select",
        cause="The pods select a TPU accelerator, topology or placement-policy label that no "
        "node carries (a tpu7x pool made without --placement-policy, or a topology mismatch "
        "between --device-type and the pool).",
        fix="Compare `kubectl get pod <pod> -o jsonpath='{.spec.nodeSelector}'` with `kubectl "
        "get nodes --show-labels`; recreate the pool with "
        "--placement-policy=<device>-<topology>-placement-policy and the slice's topology.",
        source=SEED_000 + "; https://github.com/klothoplatform/klotho/issues/553",
    ),
    Signature(
        id="untolerated-taint",
        needles=("node(s) had",),
        pattern=re.compile(r"node\(s\) had (?:untolerated )?taints? \{(?P<taint>[^}]*)\}"),
        title="Pods do not tolerate the nodes' taint",
        cause="The nodes are tainted ({taint}) and the pods have no matching toleration.",
        fix="Add the toleration (TPU nodes: key google.com/tpu, operator Exists, effect "
        "NoSchedule) or request google.com/tpu so GKE adds it; xpk workloads have it.",
        source="https://github.com/hystax/optscale/issues/568",
    ),
    Signature(
        id="kubectl-container-name",
        needles=("container name must be specified",),
        pattern=re.compile(
            r"a container name must be specified for pod (?P<pod>[\w.-]+),? choose one of: "
            r"\[(?P<containers>[^\]]*)\]"
        ),
        title="Multi-host pod needs a container name",
        cause="Multi-host xpk pods run containers jax-tpu-1, jax-tpu-2 (single-host: jax-tpu).",
        fix="`kubectl logs {pod} -c {container}`.",
        severity="warning",
        source=SEED_001,
        derive=_first_container,
    ),
)

_NODE_POOLS_AND_CLOUD: tuple[Signature, ...] = (
    Signature(
        id="reservation-exhausted",
        needles=("no available resources", "resource_exhausted"),
        pattern=re.compile(
            r"No available resources"
            r"|(?:gcloud\.|node-pools|nodePools|node pool|reservation)[^\n]*RESOURCE_EXHAUSTED"
            r"|RESOURCE_EXHAUSTED[^\n]*(?:reservation|node ?pool|nodePools|instances? |hosts\b)"
        ),
        title="Reservation has no free capacity",
        cause="The reservation cannot give the hosts the node pool needs (all in use, or "
        "DEGRADED during maintenance even with hosts free).",
        fix="Try the next reservation of your list (tpu-trainer's provisioning does this). See "
        "free hosts with `gcloud beta compute reservations describe <reservation> "
        '--zone=<zone> --format="value(aggregateReservation.hostCount,'
        "aggregateReservation.inUseHostCount)\"`; after switching, the workload's ZONE must "
        "match the node pool's zone.",
        source=SEED_000,
    ),
    Signature(
        id="capacity-stockout",
        needles=(
            "gce_stockout",
            "zone_resource_pool_exhausted",
            "enough resources available",
            "no more capacity",
            "insufficient reserved capacity",
        ),
        pattern=re.compile(
            r"GCE_STOCKOUT|ZONE_RESOURCE_POOL_EXHAUSTED|does not have enough resources available"
            r"|There is no more capacity in the zone|Insufficient reserved capacity"
        ),
        title="Zone out of capacity",
        cause="Compute Engine has no capacity of this type in the zone right now.",
        fix="Use a reservation (`--reservation-affinity=specific --reservation=<name>`), "
        "another zone that offers the TPU, or retry later; capacity errors are not retried "
        "by xpk.",
        source="https://github.com/kubernetes/k8s.io/issues/9834",
    ),
    Signature(
        id="reservation-wrong-zone",
        needles=("reservation is incorrect",),
        pattern=re.compile(r"Reservation is incorrect for the requested resources"),
        title="Reservation is not in the node pool's zone",
        cause="--reservation names a reservation that is not in the --node-locations zone.",
        fix='Find its zone with `gcloud beta compute reservations list --filter="name~<reservation>" '
        '--format="table(name,zone,status)"`, pass it as --node-locations, and use the same '
        "zone for the workload.",
        source=SEED_000,
    ),
    Signature(
        id="nodepool-already-exists",
        needles=("409",),
        pattern=re.compile(
            r"(?:code=409|\b409\b)[^\n]*(?:already exists|ALREADY_EXISTS)"
            r"(?:[^\n]*nodePools/(?P<pool>[\w-]+))?",
            re.IGNORECASE,
        ),
        title="Node pool already exists",
        cause="A node pool of that name exists, often left in ERROR state by an earlier failed "
        "create.",
        fix="`gcloud container node-pools list --cluster=<cluster> --region=<region>`, then "
        "`gcloud container node-pools delete {pool} --cluster=<cluster> --region=<region> "
        "--project=<project> --quiet` (regional clusters take --region, not --zone) and "
        "create it again.",
        source=SEED_000,
    ),
    Signature(
        id="tpu7x-placement-invalid",
        needles=("invalid_argument",),
        pattern=re.compile(
            r"INVALID_ARGUMENT[^\n]*(?:placement|tpu[-_ ]?topology|workload polic)"
            r"|(?:placement[-_ ]?(?:type|policy)|tpu[-_]topology)[^\n]*INVALID_ARGUMENT",
            re.IGNORECASE,
        ),
        title="Wrong placement flags for a TPU v7 node pool",
        cause="Multi-host tpu7x pools use a workload policy; --placement-type=COMPACT and "
        "--tpu-topology are rejected.",
        fix="Create the policy (`gcloud beta compute resource-policies create workload-policy "
        "<device>-<topology>-placement-policy --type=HIGH_THROUGHPUT "
        "--accelerator-topology=<topology> --region=<region>`) and pass only "
        "--placement-policy=<that name> to `gcloud beta container node-pools create` (or use "
        "`xpk cluster adapt`).",
        source=SEED_000 + "; " + FACTS,
    ),
    Signature(
        id="nodepool-machine-type",
        needles=("machine type",),
        pattern=re.compile(
            r"[Mm]achine type (?:with name )?'?(?P<machine>[\w-]+)'? (?:does not exist|is "
            r"(?:invalid|not supported)|not found)|Invalid machine type"
        ),
        title="Wrong GKE machine type for the TPU",
        cause="TPU v7 nodes are tpu7x-standard-4t (or tpu7x-ultranet-4t with RDMA), not "
        "names like ct7x-4x4x8.",
        fix="Replace {machine} with the TPU's GKE machine type (TPU v7: tpu7x-standard-4t; "
        "`tpu-trainer slice <device-type>` prints machine_type); list what the zone offers "
        'with `gcloud compute machine-types list --filter="name~tpu7x" --zones=<zone>`.',
        source=SEED_000,
    ),
    Signature(
        id="xpk-memory-limit",
        needles=("memory_limit",),
        pattern=re.compile(
            r"(?:Error|error|Traceback|Exception|exception)[^\n]*memory_limit"
            r"|memory_limit[^\n]*(?:Error|error|None|invalid|not )"
        ),
        title="xpk cluster adapt memory_limit bug",
        cause="xpk cluster adapt (v0.16.x) fails on its memory_limit setting for Kueue.",
        fix="Create the node pool with `gcloud beta container node-pools create ... "
        "--placement-policy=<device>-<topology>-placement-policy --reservation-affinity=specific "
        "--reservation=<reservation>` instead (tpu-trainer falls back by itself), then check "
        "Kueue and the configmap with `tpu-trainer preflight <recipe>`.",
        source=SEED_000 + "; https://github.com/AI-Hypercomputer/xpk/issues/603",
    ),
    Signature(
        id="gcp-quota",
        needles=("quota '", "quota limit '", "quota to satisfy request"),
        pattern=re.compile(
            r"(?:Quota (?:limit )?'|quota to satisfy request[^A-Z\n]*?resource\W+)"
            r"(?P<quota>[A-Za-z][A-Za-z0-9_]+)'?(?:(?: has been)? (?:exceeded|exhausted)\.?"
            r"(?:\s+Limit:? (?P<limit>[\d.]+)(?: in region (?P<region>[\w-]+))?)?)?"
        ),
        title="Project quota exceeded",
        cause="The project's quota {quota} is too low in this region (TPU quota is per region "
        "and per TPU family; TPUS_PER_TPU_FAMILY does not show in `gcloud compute regions "
        "describe`).",
        fix="Request more {quota} for region {region} (Console → IAM & Admin → Quotas; limit "
        "now {limit}), or use a region or reservation that has it.",
        source="https://github.com/marin-community/marin/issues/87",
    ),
    Signature(
        id="gcsfuse-mount",
        needles=("mountvolume.setup failed", "gcsfuse", "gcs-fuse"),
        pattern=re.compile(
            r"MountVolume\.SetUp failed for volume \"(?P<volume>[^\"]+)\"[^\n]*"
            r"(?:gcs|fuse|sidecar)|gcs-?fuse[^\n]*(?:mount failed|failed to mount|failed with "
            r"error|mountWithArgs)",
            re.IGNORECASE,
        ),
        title="Cloud Storage FUSE volume did not mount",
        cause="The gcsfuse CSI driver could not mount the bucket: driver not enabled, the pod "
        "lacks the gke-gcsfuse/volumes annotation, or its service account cannot read the "
        "bucket.",
        fix="`gcloud container clusters update <cluster> --update-addons "
        "GcsFuseCsiDriver=ENABLED --location=<region>`, annotate the pod "
        '`gke-gcsfuse/volumes: "true"`, and grant its Kubernetes service account '
        "roles/storage.objectUser on the bucket (Workload Identity).",
        source="https://github.com/GoogleCloudPlatform/ai-on-gke/issues/488",
    ),
    Signature(
        id="gcs-permission",
        needles=("storage.objects.", "storage.buckets."),
        pattern=re.compile(
            r"^(?=[^\n]*(?:denied|does not have|PermissionDenied|\b403\b|Forbidden))[^\n]*?"
            r"(?P<perm>storage\.(?:objects|buckets)\.[A-Za-z]+)"
        ),
        title="No permission on the Cloud Storage bucket",
        cause="The identity the job runs as lacks {perm} on the bucket (output directory, "
        "dataset or checkpoint).",
        fix="`gcloud storage buckets add-iam-policy-binding gs://<bucket> "
        "--member=serviceAccount:<service-account> --role=roles/storage.objectAdmin` (read-only "
        "data: roles/storage.objectViewer).",
        source="https://github.com/googleapis/google-cloud-php/issues/1206",
    ),
)

SIGNATURES: tuple[Signature, ...] = (
    _MAXTEXT_AND_XLA + _TPU_RUNTIME + _LAUNCH_PATHS + _GKE_AND_KUEUE + _NODE_POOLS_AND_CLOUD
)
"""Every known signature, in the order they are tried (order only matters for ties)."""


def by_id(signature_id: str) -> Signature:
    """The signature named ``signature_id`` (KeyError when there is none)."""
    for sig in SIGNATURES:
        if sig.id == signature_id:
            return sig
    raise KeyError(signature_id)
