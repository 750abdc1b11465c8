"""Scale-down: a TPU recipe's MaxText arguments shrunk to a smoke test on this machine's CPU.

Pure tests of the argument transformation on recipes modelled on the tpu-recipes ones (model
files given inline, then the installed MaxText's own), and the ``train`` flags that choose it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import RECIPES, RECIPES_ROOT, TESTS
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs, parse_value
from tpu_trainer.frameworks.maxtext.scale_down import ScaledArgs, scale_down
from tpu_trainer.frameworks.maxtext.scale_down_rules import TPU_ATTENTION

SCALE_DOWN = TESTS / "fixtures" / "scale_down" / "training" / "ironwood"
DENSE_RECIPE = SCALE_DOWN / "llama3.1-70b" / "8k-bf16-tpu7x-4x4x4"
MOE_RECIPE = SCALE_DOWN / "deepseek3-671b" / "4k-bf16-tpu7x-4x4x8"

# base.yml defaults the scale-down reads (MaxText 0.2.5)
BASE: dict[str, Any] = {
    "model_name": "default",
    "base_emb_dim": 2048,
    "base_num_query_heads": 16,
    "base_num_kv_heads": 16,
    "base_mlp_dim": 7168,
    "base_num_decoder_layers": 16,
    "head_dim": 128,
    "global_head_dim": 0,
    "global_num_kv_heads": 0,
    "num_experts": 1,
    "num_experts_per_tok": 1,
    "base_moe_mlp_dim": -1,
    "first_num_dense_layers": 0,
    "shared_experts": 0,
    "attention_type": "global",
    "q_lora_rank": 0,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "sliding_window_size": 0,
    "num_kv_shared_layers": 0,
    "inhomogeneous_layer_cycle_interval": 1,
    "vocab_size": 32000,
    "decoder_block": "llama2",
    "megablox": True,
    "max_target_length": 2048,
    "dataset_type": "synthetic",
}
# model files, the keys that shape them
LLAMA = {
    "model_name": "llama3.1-70b",
    "base_emb_dim": 8192,
    "base_num_query_heads": 64,
    "base_num_kv_heads": 8,
    "base_num_decoder_layers": 80,
    "base_mlp_dim": 28672,
    "head_dim": 128,
    "vocab_size": 128256,
}
DEEPSEEK = {
    "model_name": "deepseek3-671b",
    "decoder_block": "deepseek",
    "base_emb_dim": 7168,
    "base_num_query_heads": 128,
    "base_num_kv_heads": 128,
    "base_mlp_dim": 18432,
    "base_moe_mlp_dim": 2048,
    "base_num_decoder_layers": 61,
    "first_num_dense_layers": 3,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "shared_experts": 1,
    "attention_type": "mla",
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "vocab_size": 129280,
}
QWEN3_MOE = {
    "model_name": "qwen3-235b-a22b",
    "decoder_block": "qwen3_moe",
    "base_emb_dim": 4096,
    "base_mlp_dim": 1536,
    "base_moe_mlp_dim": 1536,
    "base_num_query_heads": 64,
    "base_num_kv_heads": 4,
    "base_num_decoder_layers": 94,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
}
GPT_OSS = {
    "model_name": "gpt-oss-120b",
    "decoder_block": "gpt_oss",
    "base_emb_dim": 2880,
    "base_num_query_heads": 64,
    "base_num_kv_heads": 8,
    "head_dim": 64,
    "sliding_window_size": 128,
    "base_mlp_dim": 2880,
    "base_moe_mlp_dim": 2880,
    "num_experts": 128,
    "num_experts_per_tok": 4,
    "base_num_decoder_layers": 36,
    "inhomogeneous_layer_cycle_interval": 2,
}
GEMMA4_MOE = {
    "model_name": "gemma4-26b",
    "decoder_block": "gemma4",
    "base_num_decoder_layers": 30,
    "base_emb_dim": 2816,
    "base_num_query_heads": 16,
    "base_num_kv_heads": 8,
    "base_mlp_dim": 2112,
    "base_moe_mlp_dim": 704,
    "head_dim": 256,
    "global_head_dim": 512,
    "global_num_kv_heads": 2,
    "sliding_window_size": 1024,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "shared_experts": 1,
    "vocab_size": 262144,
}
GEMMA4_E2B = {
    "model_name": "gemma4-e2b",
    "decoder_block": "gemma4_small",
    "base_num_decoder_layers": 35,
    "base_emb_dim": 1536,
    "base_num_query_heads": 8,
    "base_num_kv_heads": 1,
    "base_mlp_dim": 6144,
    "head_dim": 256,
    "global_head_dim": 512,
    "sliding_window_size": 512,
    "hidden_size_per_layer_input": 256,
    "vocab_size_per_layer_input": 262144,
    "num_kv_shared_layers": 20,
    "vocab_size": 262144,
}

# recipe arguments modelled on tpu-recipes (Ironwood) run_recipe.sh files
LLAMA_ARGS = [
    "model_name=llama3.1-70b",
    "skip_jax_distributed_system=True",
    "per_device_batch_size=2",
    "profile_periodically_period=10000",
    "remat_policy=custom",
    "decoder_layer_input=device",
    "ici_fsdp_parallelism=-1",
    "ici_context_parallelism=8",
    "dataset_type=synthetic",
    "opt_type=adamw",
    "mu_dtype=bfloat16",
    "sa_block_q=2048",
    "use_tokamax_splash=True",
    "max_target_length=8192",
    "profiler=xplane",
    "skip_first_n_steps_for_profiler=5",
    "profiler_steps=2",
    "attention=flash",
    "quantization=fp8_full",
    "use_qwix_quantization=True",
    "weight_quantization_calibration_method=fixed,-224,224",
    "steps=30",
    "base_output_directory=gs://bucket/out",
    "run_name=user-llama",
]
DEEPSEEK_ARGS = [
    "model_name=deepseek3-671b",
    "per_device_batch_size=8.0",
    "max_target_length=4096",
    "dcn_data_parallelism=-1",
    "ici_fsdp_transpose_parallelism=2",
    "ici_fsdp_parallelism=-1",
    "remat_policy=custom",
    "decoder_layer_input=offload",
    "use_random_routing=True",
    "megablox=True",
    "sparse_matmul=True",
    "use_tokamax_gmm=True",
    "shard_exp_on_fsdp=True",
    "wi_tile_fwd_embed_dim=7168",
    "wi_tile_fwd_mlp_dim=2048",
    "attention=flash",
    "tokenizer_path=deepseek-ai/DeepSeek-V3-Base",
    "tokenizer_type=huggingface",
    "enable_checkpointing=True",
    "async_checkpointing=true",
    "dataset_type=grain",
    "grain_file_type=arrayrecord",
    "grain_train_files=/mnt/data/c4/*.arrayrecord",
    "grain_worker_count=2",
    "steps=30",
]


def _config(model: Mapping[str, Any], args: list[str]) -> dict[str, Any]:
    """What MaxText layers: base.yml, the model file, then the (non-model) arguments."""
    out = {**BASE, **model}
    for text in args:
        key, _, value = text.partition("=")
        if key not in model:
            out[key] = parse_value(value)
    return out


def _values(scaled: ScaledArgs) -> dict[str, str]:
    return dict(a.partition("=")[::2] for a in scaled.args)


def _shape(config: Mapping[str, Any], scaled: ScaledArgs) -> dict[str, Any]:
    """The configuration MaxText builds from the scaled arguments (override_model_config)."""
    return {**config, **{k: parse_value(v) for k, v in _values(scaled).items()}}


def assert_consistent(config: Mapping[str, Any], scaled: ScaledArgs) -> dict[str, Any]:
    """What must hold for any scaled-down recipe; returns the scaled configuration."""
    values = _values(scaled)
    cpu = _shape(config, scaled)
    assert values["override_model_config"] == "true"
    assert all(c.why for c in scaled.changes)
    for change in scaled.changes:
        if change.after is None:
            assert change.key not in values, change
        else:
            assert values[change.key] == change.after, change
    q, kv = cpu["base_num_query_heads"], cpu["base_num_kv_heads"]
    assert q % kv == 0
    if config["base_num_query_heads"] % config["base_num_kv_heads"] == 0:
        assert q // kv == config["base_num_query_heads"] // config["base_num_kv_heads"]
    assert cpu["base_emb_dim"] <= 512 and cpu["base_mlp_dim"] <= 1024
    assert cpu["head_dim"] * q <= 4 * cpu["base_emb_dim"]
    assert cpu["max_target_length"] <= 256 and int(values["steps"]) <= 10
    assert cpu["per_device_batch_size"] == 1
    assert values["dataset_type"] == "synthetic"
    assert (cpu["num_experts"] > 1) == (config["num_experts"] > 1)  # MoE stays MoE
    assert 1 <= cpu["num_experts_per_tok"] <= cpu["num_experts"] <= 8
    assert cpu["shared_experts"] == config["shared_experts"]
    layers = cpu["base_num_decoder_layers"]
    assert 2 <= layers <= 12
    if config["first_num_dense_layers"] > 0:
        assert 0 < cpu["first_num_dense_layers"] < layers  # dense layers, then MoE ones
    if config["num_kv_shared_layers"] > 0:  # the layers before the shared ones hold a cycle
        assert 0 < cpu["num_kv_shared_layers"] <= layers - 5
    if config["global_num_kv_heads"] > 0:
        assert q % cpu["global_num_kv_heads"] == 0
    if config["sliding_window_size"] > 0:
        assert 0 < cpu["sliding_window_size"] < cpu["max_target_length"]
    if config["base_moe_mlp_dim"] == config["base_mlp_dim"] > 0:
        assert cpu["base_moe_mlp_dim"] == cpu["base_mlp_dim"]  # fully-MoE models stay so
    assert cpu["vocab_size"] <= 4096
    assert cpu["megablox"] is not True or cpu["num_experts"] == 1  # no interpreted Pallas GMM
    for key, value in values.items():
        if key.startswith(("ici_", "dcn_")) and key.endswith("_parallelism"):
            assert value in ("1", "-1"), key
        assert "gs://" not in value or key == "base_output_directory", key
    assert values.get("attention", "autoselected") not in TPU_ATTENTION
    assert not any(k.startswith("profil") for k in values)
    return cpu


@pytest.mark.unit
def test_dense_recipe_is_shrunk_with_its_gqa_ratio_and_tpu_only_settings_neutralised() -> None:
    config = _config(LLAMA, LLAMA_ARGS)
    scaled = scale_down(LLAMA_ARGS, config)
    values = _values(scaled)
    cpu = assert_consistent(config, scaled)
    assert (cpu["base_num_query_heads"], cpu["base_num_kv_heads"]) == (8, 1)
    assert cpu["base_num_query_heads"] * cpu["head_dim"] == cpu["base_emb_dim"]  # as in 70b
    assert values["attention"] == "dot_product"
    assert values["ici_context_parallelism"] == "1"
    assert values["ici_fsdp_parallelism"] == "-1"
    # everything else is the recipe's: that is what the smoke test tests
    for kept in (
        "remat_policy=custom",
        "decoder_layer_input=device",
        "mu_dtype=bfloat16",
        "sa_block_q=2048",
        "use_tokamax_splash=True",
        "quantization=fp8_full",
        "weight_quantization_calibration_method=fixed,-224,224",
        "skip_jax_distributed_system=True",
        "base_output_directory=gs://bucket/out",  # the launcher replaces it
        "run_name=user-llama",
    ):
        assert kept in scaled.args
    why = {c.key: c for c in scaled.changes}
    assert why["attention"].before == "flash" and "kernel" in why["attention"].why
    assert why["base_num_kv_heads"].before == "8" and "GQA ratio 8" in why["base_num_kv_heads"].why
    assert why["profiler"].after is None
    assert "8/1 heads" in scaled.summary and "2 layers" in scaled.summary


@pytest.mark.unit
def test_moe_recipe_stays_moe_with_a_dense_layer_first_and_mla_scaled() -> None:
    config = _config(DEEPSEEK, DEEPSEEK_ARGS)
    scaled = scale_down(DEEPSEEK_ARGS, config)
    values = _values(scaled)
    cpu = assert_consistent(config, scaled)
    assert (cpu["base_num_decoder_layers"], cpu["first_num_dense_layers"]) == (2, 1)
    assert (cpu["num_experts"], cpu["num_experts_per_tok"]) == (4, 2)
    assert cpu["base_moe_mlp_dim"] < cpu["base_mlp_dim"]  # narrower experts, as in the model
    assert 0 < cpu["kv_lora_rank"] < cpu["q_lora_rank"] < cpu["base_emb_dim"]
    assert cpu["qk_rope_head_dim"] < cpu["qk_nope_head_dim"] == cpu["v_head_dim"]
    assert "head_dim" not in values  # MLA has its own head dims
    assert values["use_tokamax_gmm"] == "false" and values["use_random_routing"] == "false"
    assert values["megablox"] == "false"  # the Pallas kernel is slow and fussy on a CPU
    assert values["ici_fsdp_transpose_parallelism"] == "1"
    assert values["enable_checkpointing"] == "false"
    assert not any(k.startswith("grain_") for k in values)
    for kept in (
        "sparse_matmul=True",
        "decoder_layer_input=offload",
        "wi_tile_fwd_embed_dim=7168",  # jax ragged_dot clamps tiles to the scaled widths
    ):
        assert kept in scaled.args
    assert "tokenizer_type=huggingface" in scaled.args
    dataset = next(c for c in scaled.changes if c.key == "dataset_type")
    assert (dataset.before, dataset.after) == ("grain", "synthetic")
    assert "1 dense + 1 MoE" in scaled.summary and "MLA" in scaled.summary


@pytest.mark.parametrize(
    ("model", "layers", "shared"),
    [(GPT_OSS, 2, 0), (GEMMA4_MOE, 6, 0), (GEMMA4_E2B, 6, 1), (QWEN3_MOE, 2, 0)],
)
@pytest.mark.unit
def test_layer_patterns_keep_one_full_cycle(
    model: dict[str, Any], layers: int, shared: int
) -> None:
    args = [f"model_name={model['model_name']}", "attention=flash", "steps=20"]
    config = _config(model, args)
    cpu = assert_consistent(config, scale_down(args, config))
    assert cpu["base_num_decoder_layers"] == layers
    assert cpu["num_kv_shared_layers"] == shared


@pytest.mark.unit
def test_a_model_whose_experts_are_its_only_mlp_keeps_equal_widths() -> None:
    config = _config(QWEN3_MOE, ["model_name=qwen3-235b-a22b"])
    cpu = assert_consistent(config, scale_down(["model_name=qwen3-235b-a22b"], config))
    assert cpu["base_moe_mlp_dim"] == cpu["base_mlp_dim"] == 512
    assert (cpu["base_num_query_heads"], cpu["base_num_kv_heads"]) == (16, 1)  # ratio 16 kept


@pytest.mark.unit
def test_gemma4_global_layers_keep_a_kv_head_and_per_layer_embeddings_follow_the_vocab() -> None:
    args = ["model_name=gemma4-e2b", "scan_layers=False"]
    config = _config(GEMMA4_E2B, args)
    values = _values(scale_down(args, config))
    assert values["vocab_size_per_layer_input"] == values["vocab_size"]
    assert int(values["hidden_size_per_layer_input"]) < 256
    assert int(values["global_head_dim"]) == 2 * int(values["head_dim"])
    assert "scan_layers=False" in [f"{k}={v}" for k, v in values.items()]
    config = _config(GEMMA4_MOE, ["model_name=gemma4-26b"])
    assert _values(scale_down(["model_name=gemma4-26b"], config))["global_num_kv_heads"] == "1"


@pytest.mark.unit
def test_gpu_only_quantization_and_cloud_switches_are_dropped_or_turned_off() -> None:
    args = [
        "model_name=llama3.1-70b",
        "quantization=nanoo_fp8",
        "gcs_metrics=True",
        "compile_topology=tpu7x-128",
        "load_parameters_path=gs://bucket/ckpt/items/100",
        "hf_path=allenai/c4",
        "dataset_type=hf",
    ]
    scaled = scale_down(args, _config(LLAMA, args))
    values = _values(scaled)
    assert "quantization" not in values and "compile_topology" not in values
    assert "load_parameters_path" not in values and "hf_path" not in values
    assert values["gcs_metrics"] == "false"
    why = {c.key: c.why for c in scaled.changes}
    assert "GPU" in why["quantization"] and "Cloud Storage" in why["load_parameters_path"]


@pytest.mark.unit
def test_keys_the_user_set_are_left_alone() -> None:
    args = [*LLAMA_ARGS, "steps=25", "base_num_decoder_layers=4"]
    scaled = scale_down(args, _config(LLAMA, args), fixed={"steps", "base_num_decoder_layers"})
    values = _values(scaled)
    assert values["steps"] == "25" and values["base_num_decoder_layers"] == "4"
    assert {"steps", "base_num_decoder_layers"}.isdisjoint(c.key for c in scaled.changes)


@pytest.mark.unit
def test_keys_maxtext_does_not_know_are_kept_and_flagged_with_the_closest_one() -> None:
    args = ["model_name=llama3.1-70b", "fsdp_shard_on_exp=True", "steps=30"]
    known = {*BASE, "shard_exp_on_fsdp", "steps", "override_model_config"}
    known |= {"per_device_batch_size", "enable_checkpointing"}
    scaled = scale_down(args, _config(LLAMA, args), known)
    assert "fsdp_shard_on_exp=True" in scaled.args  # MaxText decides; the run says what it said
    assert scaled.unknown == ("fsdp_shard_on_exp (did you mean shard_exp_on_fsdp?)",)


@pytest.mark.unit
def test_a_change_says_what_it_did() -> None:
    scaled = scale_down(DEEPSEEK_ARGS, _config(DEEPSEEK, DEEPSEEK_ARGS))
    lines = [c.describe() for c in scaled.changes]
    assert "num_experts: 256 → 4 (still a mixture of experts, few enough for a CPU)" in lines
    assert any(line.startswith("grain_worker_count=2 dropped: ") for line in lines)
    assert scaled.to_json()["changes"][0]["key"] == "override_model_config"


@pytest.mark.parametrize(
    "model",
    [
        "llama3.1-405b",
        "deepseek3-671b",
        "deepseek3-671b-2dfsdp",
        "qwen3-235b-a22b",
        "gpt-oss-120b",
        "gemma4-26b",
        "gemma4-31b",
        "gemma4-e2b",
        "gemma4-e4b",
        "mixtral-8x7b",
        "llama4-17b-16e",
    ],
)
@pytest.mark.unit
def test_the_installed_maxtext_model_files_scale_consistently(model: str) -> None:
    configs = MaxTextConfigs.load()
    args = [f"model_name={model}", "attention=flash", "ici_fsdp_parallelism=64"]
    config = configs.effective(dict(a.partition("=")[::2] for a in args))
    scaled = scale_down(args, config, configs.keys)
    assert_consistent(config, scaled)
    assert scaled.unknown == ()


# ---------------------------------------------------------------------------------------------
# train --backend / --scale-down: refusals name the flag to change (no runtime needed)


def _train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "TPU_TRAINER_CONFIG": "",
        "TPU_TRAINER_HOME": str(tmp_path / "store"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "train", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--scale-down"], "add --backend local"),
        (["--backend", "gke", "--scale-down"], "add --backend local"),
        (["--backend", "local"], "add --scale-down"),
        (["--backend", "local", "--rehearse", "x.yaml"], "drop --rehearse"),
    ],
)
@pytest.mark.e2e
def test_train_refuses_flag_combinations_that_cannot_work(
    tmp_path: Path, flags: list[str], needle: str
) -> None:
    proc = _train(tmp_path, str(DENSE_RECIPE), *flags)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr
    assert not (tmp_path / "store" / "runs").exists()  # refused before anything ran


@pytest.mark.e2e
def test_train_refuses_to_send_a_cpu_recipe_to_gke_and_to_shrink_maxdiffusion(
    tmp_path: Path,
) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "local" / "tiny-llama"
    proc = _train(tmp_path, str(example), "--backend", "gke")
    assert proc.returncode == 2 and "drop --backend gke" in proc.stderr
    diffusion = RECIPES_ROOT / RECIPES["maxdiffusion"]
    proc = _train(tmp_path, str(diffusion), "--backend", "local", "--scale-down")
    assert proc.returncode == 2 and "MaxText recipes" in proc.stderr
