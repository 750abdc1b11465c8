"""MaxText configuration: unknown keys, value types, model keys and names, statically and as
MaxText 0.2.5's own pyconfig judges them."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from types import ModuleType

import pytest

from tpu_trainer.checks.pyconfig import (
    ACCEPTED_BEYOND_BASE,
    DERIVED,
    NULLABLE,
    RENAMES,
    check_static,
    cli_value,
)
from tpu_trainer.checks.pyconfig_runtime import run_pyconfig, verdict_findings
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice
from tpu_trainer.runtime.manager import MAXTEXT, is_installed
from tpu_trainer.runtime.probe import probe_path

SLICE = Slice.parse("tpu7x-4x4x4")

RECIPE_LIKE = (
    "model_name=llama3.1-70b", "skip_jax_distributed_system=True", "dtype=bfloat16",
    "per_device_batch_size=2", "async_checkpointing=False", "enable_checkpointing=False",
    "use_iota_embed=True", "remat_policy=custom", "decoder_layer_input=device",
    "context=device", "query_proj=device", "ici_fsdp_parallelism=-1", "dataset_type=synthetic",
    "opt_type=adamw", "mu_dtype=bfloat16", "sa_block_q=2048", "sa_block_kv=2048",
    "sa_q_layout=SEQ_MINOR", "sa_use_fused_bwd_kernel=True", "use_tokamax_splash=True",
    "max_target_length=8192", "tokenizer_type=tiktoken",
    "tokenizer_path=assets/tokenizer_llama3.tiktoken", "profiler=xplane",
    "skip_first_n_steps_for_profiler=5", "profiler_steps=2", "attention=flash", "steps=30",
    "base_output_directory=", "run_name=test-llama3-1-70b", "learning_rate=1e-5",
    "adam_weight_decay=0.1", "muon_weight_decay=0.1",
)  # fmt: skip
"""A tpu-recipes command (llama3.1-70b 8k bf16), plus seed 001's corrected weight decay."""


@pytest.fixture(scope="module")
def configs() -> MaxTextConfigs:
    return MaxTextConfigs.load()


def _check(configs: MaxTextConfigs, *argv: str) -> list[Finding]:
    return check_static(MaxTextRequest.from_args(list(argv), SLICE), configs)


def _failed(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status is Level.FAIL]


@pytest.mark.unit
def test_seed_001_weight_decay_fails_naming_adam_and_muon(configs: MaxTextConfigs) -> None:
    failed = _failed(_check(configs, "model_name=llama3.1-70b", "weight_decay=0.1"))
    assert [f.name for f in failed] == ["maxtext-config keys"]
    assert "MAXTEXT CONFIG ERROR: 'weight_decay' not in 'emb_dim'" in failed[0].message
    assert "adam_weight_decay" in failed[0].message
    assert "muon_weight_decay" in failed[0].message
    assert "weight_decay=0.1 → adam_weight_decay=0.1" in failed[0].fix


@pytest.mark.unit
def test_unknown_key_fails_and_renamed_key_gets_its_new_name(configs: MaxTextConfigs) -> None:
    failed = _failed(_check(configs, "foo_bar_baz=1"))
    assert "'foo_bar_baz' not in" in failed[0].message
    assert "drop foo_bar_baz" in failed[0].fix
    # tpu-recipes' deepseek3/gpt-oss/qwen3 commands: renamed to shard_exp_on_fsdp in 0.2.5
    renamed = _failed(_check(configs, "fsdp_shard_on_exp=True"))
    assert "fsdp_shard_on_exp=True → shard_exp_on_fsdp=True" in renamed[0].fix
    typo = _failed(_check(configs, "per_device_bacth_size=2"))
    assert "per_device_batch_size" in typo[0].message


@pytest.mark.unit
def test_derived_and_nested_keys(configs: MaxTextConfigs) -> None:
    derived = _check(configs, "emb_dim=4096")
    assert not _failed(derived)
    warned = [f for f in derived if f.status is Level.WARN]
    assert "emb_dim" in warned[0].message
    assert "base_emb_dim" in warned[0].fix
    bare = _failed(_check(configs, "lora_rank=8"))
    assert "lora_rank=8 → lora.lora_rank=8" in bare[0].fix
    assert not _failed(_check(configs, "lora.lora_rank=8"))


@pytest.mark.unit
def test_model_key_needs_override_model_config(configs: MaxTextConfigs) -> None:
    # MaxText refuses a model-file key only when the value differs from the file's (4096 here).
    failed = _failed(_check(configs, "model_name=llama3-8b", "base_emb_dim=2048"))
    assert [f.name for f in failed] == ["maxtext-config model keys"]
    assert "Keys ['base_emb_dim'] are overridden by both model config" in failed[0].message
    assert "override_model_config=true" in failed[0].fix
    assert not _failed(
        _check(configs, "model_name=llama3-8b", "base_emb_dim=2048", "override_model_config=true")
    )
    assert not _failed(_check(configs, "model_name=llama3-8b", "base_emb_dim=4096"))


@pytest.mark.parametrize(
    "arg",
    ["steps=ten", "steps=10.5", "enable_checkpointing=2", "run_name=123", "dataset_path="],
)
@pytest.mark.unit
def test_wrong_types_fail(configs: MaxTextConfigs, arg: str) -> None:
    failed = _failed(_check(configs, arg))
    assert [f.name for f in failed] == ["maxtext-config types"]
    assert arg.partition("=")[0] in failed[0].message
    assert "Input should be a valid" in failed[0].message


@pytest.mark.parametrize(
    "arg",
    [
        "steps=10.0",
        "per_device_batch_size=0.5",
        "muon_weight_decay=0.1",
        "learning_rate=1e-5",
        "enable_checkpointing=False",
        "enable_checkpointing=1",
        "remat_policy=none",
        "base_output_directory=",
        "train_data_columns=text",
    ],
)
@pytest.mark.unit
def test_values_pydantic_accepts_pass(configs: MaxTextConfigs, arg: str) -> None:
    assert not _failed(_check(configs, arg))


@pytest.mark.unit
def test_unknown_model_names_close_ones(configs: MaxTextConfigs) -> None:
    # llama3-405b has a model file but is not in 0.2.5's ModelName list.
    failed = _failed(_check(configs, "model_name=llama3-405b"))
    assert "literal_error" in failed[0].message
    assert "llama3.1-405b" in failed[0].fix
    assert not _failed(_check(configs, "model_name=llama3.1-8b-Instruct"))
    assert _failed(_check(configs, "model_name=qwen3-8b-Instruct"))  # not in ModelName


@pytest.mark.unit
def test_tpu_recipes_like_command_passes(configs: MaxTextConfigs) -> None:
    findings = _check(configs, *RECIPE_LIKE)
    assert not _failed(findings)
    assert {f.name for f in findings} >= {"maxtext-config keys", "maxtext-config types"}


@pytest.mark.unit
def test_tables_name_real_maxtext_keys(configs: MaxTextConfigs) -> None:
    known = set(configs.base) | ACCEPTED_BEYOND_BASE | set(DERIVED)
    assert len(known) == 865  # the names MaxText 0.2.5 lists in its unknown-key error
    for old, rename in RENAMES.items():
        assert old not in known, old
        assert set(rename.targets) <= set(configs.base), old
    assert set(configs.base) >= NULLABLE
    assert not ACCEPTED_BEYOND_BASE & set(configs.base)


@pytest.mark.unit
def test_values_are_typed_as_omegaconf_types_them() -> None:
    assert cli_value("") is None
    assert cli_value("1e-5") == pytest.approx(1e-5)
    assert cli_value("8.0") == 8.0
    assert cli_value("yes") is True
    assert cli_value("2024-01-01") == "2024-01-01"
    assert cli_value("[1, 2]") == [1, 2]
    assert cli_value("fixed,-224,224") == "fixed,-224,224"


@pytest.mark.unit
def test_static_check_is_fast(configs: MaxTextConfigs) -> None:
    request = MaxTextRequest.from_args([*RECIPE_LIKE, "weight_decay=0.1"], SLICE)
    check_static(request, configs)
    started = time.perf_counter()
    for _ in range(50):
        check_static(request, configs)
    assert (time.perf_counter() - started) / 50 < 0.010


def _probe_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pyconfig_probe", probe_path("pyconfig_probe"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_probe_refuses_writes_outside_its_folder_and_trims_the_name_list(tmp_path: Path) -> None:
    probe = _probe_module()
    guard = probe._WriteGuard([str(tmp_path)])
    write = os.O_WRONLY | os.O_CREAT
    with pytest.raises(PermissionError):
        guard("open", ("/dev/termination-log", "w", write))
    with pytest.raises(PermissionError):
        guard("open", ("/tmp/elsewhere.txt", None, write))  # os.open
    guard("open", (str(tmp_path / "ok.txt"), "w", write))
    guard("open", ("/etc/hostname", "r", os.O_RDONLY))
    assert guard.blocked == ["/dev/termination-log", "/tmp/elsewhere.txt"]
    names = ", ".join(f"'name_{i}'" for i in range(865))
    trimmed = probe._trim(f"'foo_bar_baz' not in {names}.")
    assert trimmed == "'foo_bar_baz' not in MaxText's list of accepted names"


RUNTIME_CASES = {
    "good": RECIPE_LIKE,
    "unknown key": [*RECIPE_LIKE, "weight_decay=0.1"],
    "model key, no override": ["model_name=llama3-8b", "base_emb_dim=2048"],
    "bad type": ["steps=ten"],
    "str given a number": ["run_name=123"],
    "derived key": ["emb_dim=7"],
}


@pytest.mark.runtime
def test_static_check_agrees_with_maxtexts_own_pyconfig(configs: MaxTextConfigs) -> None:
    if not is_installed(MAXTEXT):
        pytest.fail(
            f"the MaxText {MAXTEXT.version} runtime is not installed; this test needs it: "
            "run `tpu-trainer runtime install maxtext`"
        )
    requests = [MaxTextRequest.from_args(list(a), SLICE) for a in RUNTIME_CASES.values()]
    started = time.perf_counter()
    verdicts = run_pyconfig(requests, SubprocessRunner())
    wall = time.perf_counter() - started
    for name, request, verdict in zip(RUNTIME_CASES, requests, verdicts, strict=True):
        static_fails = bool(_failed(check_static(request, configs)))
        assert static_fails == (not verdict.ok), (name, verdict)
    by_name = dict(zip(RUNTIME_CASES, verdicts, strict=True))
    assert by_name["good"].derived["num_target_devices"] == SLICE.jax_devices
    assert by_name["unknown key"].key == "weight_decay"
    assert by_name["model key, no override"].key == "base_emb_dim"
    assert by_name["bad type"].error_type == "ValidationError"
    assert by_name["derived key"].derived["emb_dim"] != 7  # MaxText replaced the given value
    finding = verdict_findings(by_name["unknown key"])[0]
    assert finding.status is Level.FAIL
    assert "adam_weight_decay" in finding.fix
    assert wall < 120, f"the pyconfig probe took {wall:.1f} s"
