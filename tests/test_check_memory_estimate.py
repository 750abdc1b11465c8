"""The analytic memory estimate: parameter counts, the parts per device, the calibration table
against real AOT compiles, the fixes it proposes and the finding."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tpu_trainer.checks.memory_estimate import (
    CALIBRATION,
    GIB,
    OPTIMIZER_OFFLOAD_SAVING,
    MemoryEstimate,
    ModelShape,
    calibrate,
    check_estimate,
    count_parameters,
    estimate_memory,
    memory_fixes,
    raw_estimate,
    usable_hbm,
)
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Level
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

TINY = {
    "model_name": "default",
    "base_emb_dim": "256",
    "base_num_decoder_layers": "2",
    "base_mlp_dim": "512",
    "base_num_query_heads": "4",
    "base_num_kv_heads": "4",
    "head_dim": "64",
    "per_device_batch_size": "1",
    "max_target_length": "128",
}
V7_8 = Slice.parse("tpu7x-8")


@pytest.fixture(scope="module")
def configs() -> MaxTextConfigs:
    return MaxTextConfigs.load()


def params(configs: MaxTextConfigs, **args: str) -> int:
    return count_parameters(ModelShape.from_config(configs.effective(args))).total


def test_tiny_model_count_matches_the_arithmetic(configs: MaxTextConfigs) -> None:
    embedding_and_logits = 2 * 32000 * 256
    attention = 2 * 256 * 64 * (4 + 4 + 4 + 4)
    gated_mlp = 2 * 3 * 256 * 512
    norms = 2 * 2 * 256 + 256
    assert params(configs, **TINY) == embedding_and_logits + attention + gated_mlp + norms


@pytest.mark.parametrize(
    ("model", "published"),
    [
        ("llama3.1-8b", 8_030_261_248),  # GQA, untied embeddings
        ("llama3-70b", 70_553_706_496),
        ("mixtral-8x7b", 46_702_792_704),  # MoE, no shared expert
        ("deepseek3-671b", 671.0e9),  # MLA, 3 dense layers, 256 experts + 1 shared
        ("qwen3-30b-a3b", 30.5e9),
        ("gemma2-9b", 9.24e9),  # a layer holds a local and a global block; tied embeddings
    ],
)
def test_parameter_counts_match_published_sizes(
    configs: MaxTextConfigs, model: str, published: float
) -> None:
    assert params(configs, model_name=model) == pytest.approx(published, rel=0.005)


def test_calibration_table_matches_the_current_arithmetic(configs: MaxTextConfigs) -> None:
    """A change to the estimate must re-record the ratios measured against AOT compiles."""
    assert len(CALIBRATION) >= 3
    for point in CALIBRATION:
        args = dict(a.split("=", 1) for a in point.args)
        raw = raw_estimate(configs.effective(args), Slice.parse(point.device_type))
        assert raw.params == point.params, point.label
        assert raw.total / point.aot_bytes == pytest.approx(point.ratio, rel=0.002), point.label
        calibrated = calibrate(raw)
        assert calibrated.calibrated_on == point.label
        assert calibrated.total == pytest.approx(point.aot_bytes, rel=0.002)


def test_parts_follow_dtype_optimizer_and_sharding(configs: MaxTextConfigs) -> None:
    cfg = configs.effective({"model_name": "llama3-70b", "per_device_batch_size": "1"})
    e = raw_estimate(cfg, V7_8)
    n = e.params
    assert e.param_shards == 8
    assert e.weights == pytest.approx(n * 4 / 8)  # float32 weights
    assert e.optimizer == pytest.approx(n * 8 / 8)  # two float32 Adam moments
    assert e.gradients == pytest.approx(n * 4 / 8)
    data2 = raw_estimate({**cfg, "ici_data_parallelism": 2}, V7_8)
    assert data2.param_shards == 4
    assert data2.weights == pytest.approx(2 * e.weights)
    bf16 = raw_estimate({**cfg, "weight_dtype": "bfloat16"}, V7_8)
    assert bf16.weights == pytest.approx(e.weights / 2)
    offloaded = raw_estimate({**cfg, "optimizer_memory_host_offload": True}, V7_8)
    assert offloaded.optimizer == pytest.approx(e.optimizer * (1 - OPTIMIZER_OFFLOAD_SAVING))


def test_estimate_matches_compiles_the_calibration_did_not_use(configs: MaxTextConfigs) -> None:
    """AOT figures of MaxText 0.2.5 for llama3-70b (per_device_batch_size=1,
    max_target_length=2048): 78.77 GiB per device on tpu7x-16 (fits), 117.77 GiB on tpu7x-8
    with optimizer_memory_host_offload=true (out of memory)."""
    args = {"model_name": "llama3-70b", "per_device_batch_size": "1", "max_target_length": "2048"}
    on_16 = estimate_memory(configs.effective(args), Slice.parse("tpu7x-16"))
    offloaded = estimate_memory(
        configs.effective({**args, "optimizer_memory_host_offload": "true"}), V7_8
    )
    assert on_16.total / GIB == pytest.approx(78.77, rel=0.03)
    assert offloaded.total / GIB == pytest.approx(117.77, rel=0.03)


def test_activations_follow_the_remat_policy_and_batch(configs: MaxTextConfigs) -> None:
    cfg = configs.effective({"model_name": "llama3.1-8b", "per_device_batch_size": "2"})
    full = raw_estimate(cfg, V7_8)
    minimal = raw_estimate({**cfg, "remat_policy": "minimal"}, V7_8)
    qkv = raw_estimate({**cfg, "remat_policy": "save_qkv_proj"}, V7_8)
    offload = raw_estimate(
        {**cfg, "remat_policy": "custom", "decoder_layer_input": "offload"}, V7_8
    )
    double = raw_estimate({**cfg, "per_device_batch_size": 4}, V7_8)
    assert full.activations < qkv.activations < minimal.activations
    assert full.layer_inputs > 0
    assert offload.layer_inputs == 0
    assert offload.activations == pytest.approx(full.activations - full.layer_inputs)
    assert double.activations == pytest.approx(2 * full.activations)
    assert double.fixed == pytest.approx(full.fixed)


def test_more_devices_split_the_state_but_not_the_activations(configs: MaxTextConfigs) -> None:
    cfg = configs.effective({"model_name": "llama3-70b", "per_device_batch_size": "1"})
    e = estimate_memory(cfg, V7_8)
    wider = e.on_devices(32)
    assert wider.param_shards == 32
    assert wider.sharded == pytest.approx(e.sharded / 4)
    assert wider.activations == e.activations
    direct = estimate_memory(cfg, Slice.parse("tpu7x-2x2x4"))
    assert direct.total == pytest.approx(wider.total, rel=1e-6)


def test_usable_hbm_is_xlas_figure_where_measured() -> None:
    v7, v7_measured = usable_hbm(V7_8)
    v6e, v6e_measured = usable_hbm(Slice.parse("v6e-4x4"))
    v5p, v5p_measured = usable_hbm(Slice.parse("v5p-8"))
    assert v7 / GIB == pytest.approx(94.74)
    assert v6e / GIB == pytest.approx(31.24)
    assert v5p == 95e9
    assert (v7_measured, v6e_measured, v5p_measured) == (True, True, False)


def synthetic(fixed_gib: float, activations_gib: float) -> MemoryEstimate:
    return MemoryEstimate(
        params=10**9,
        devices=8,
        param_shards=8,
        weights=fixed_gib * GIB / 4,
        optimizer=fixed_gib * GIB / 2,
        gradients=fixed_gib * GIB / 4,
        activations=activations_gib * GIB,
        layer_inputs=activations_gib * GIB / 10,
        gathered=0.0,
        calibration=1.0,
        calibrated_on="",
    )


def test_batch_fix_assumes_activations_grow_linearly() -> None:
    # 40 GiB fixed + 8 × 10 GiB activations; aim 0.95 × 94.74 = 90.0 → room for 5
    est = synthetic(40, 80)
    cfg = {"per_device_batch_size": 8, "remat_policy": "full"}
    fixes = memory_fixes(cfg, V7_8, 1, 120 * GIB, 94.74 * GIB, est)
    assert fixes[0].startswith("per_device_batch_size=5 (now 8): about 90.00 GiB")


def test_batch_fix_says_when_the_state_alone_does_not_fit() -> None:
    fixes = memory_fixes(
        {"per_device_batch_size": 4}, V7_8, 1, 130 * GIB, 94.74 * GIB, synthetic(100, 30)
    )
    assert fixes[0].startswith("per_device_batch_size alone cannot fit")


def test_fix_order_and_choices() -> None:
    cfg = {"per_device_batch_size": 2, "remat_policy": "minimal"}
    fixes = memory_fixes(cfg, V7_8, 1, 110 * GIB, 94.74 * GIB, synthetic(100, 10))
    assert [f.split(" ", 1)[0] for f in fixes] == [
        "per_device_batch_size",
        "remat_policy=full",
        "optimizer_memory_host_offload=true",
        "remat_policy=custom",
        "tpu7x-2x2x2",
    ]
    assert "enough on its own" in fixes[2]
    done = {
        "per_device_batch_size": 1,
        "remat_policy": "custom",
        "decoder_layer_input": "offload",
        "optimizer_memory_host_offload": True,
    }
    assert [
        f.split(" ", 1)[0]
        for f in memory_fixes(done, V7_8, 1, 150 * GIB, 94.74 * GIB, synthetic(120, 30))
    ] == ["tpu7x-2x2x2"]


def test_chips_fix_names_the_smallest_slice_that_fits() -> None:
    # 400 GiB of state on 8 devices: 16 devices → 200, 32 → 100, 64 → 50 (+ 20 activations)
    fixes = memory_fixes({}, V7_8, 1, 420 * GIB, 94.74 * GIB, synthetic(400, 20))
    assert fixes[-1].startswith("tpu7x-2x4x4 (64 devices per slice): about 70.00 GiB")


def request(args: dict[str, str], device: str = "tpu7x-8") -> MaxTextRequest:
    return MaxTextRequest(args=args, slice=Slice.parse(device))


def test_check_passes_the_tiny_model(configs: MaxTextConfigs) -> None:
    (finding,) = check_estimate(request(TINY), configs, configs.effective(TINY))
    assert finding.name == "memory-fit (estimate)"
    assert finding.status is Level.PASS
    assert finding.message.startswith("estimate: about 0.06 GiB of 94.74 GiB per device (0 %)")
    assert "scaled ×0.92 from the AOT compile of tiny" in finding.message


def test_check_warns_llama3_70b_on_8_devices_and_passes_on_64(configs: MaxTextConfigs) -> None:
    args = {"model_name": "llama3-70b", "per_device_batch_size": "1", "max_target_length": "2048"}
    eff = configs.effective(args)
    (small,) = check_estimate(request(args), configs, eff)
    (big,) = check_estimate(request(args, "tpu7x-2x4x4"), configs, eff)
    assert small.status is Level.WARN  # an estimate never fails a recipe; the compile does
    assert "about 151.15 GiB of 94.74 GiB" in small.message
    assert "optimizer_memory_host_offload=true" in small.fix
    assert small.fix.startswith("confirm with `tpu-trainer check --aot`")
    assert big.status is Level.PASS


def test_check_skips_the_cpu_and_reports_a_broken_config(configs: MaxTextConfigs) -> None:
    assert check_estimate(request(TINY, "cpu-1"), configs, configs.effective(TINY)) == []
    (finding,) = check_estimate(request(TINY), configs, {"model_name": "default"})
    assert finding.status is Level.WARN
    assert "cannot estimate" in finding.message


def test_calibration_uses_the_nearest_case_by_size() -> None:
    raw = replace(synthetic(10, 1), params=60 * 10**9)
    assert calibrate(raw).calibrated_on == "llama3-70b on tpu7x-8 (OOM)"
    assert calibrate(replace(raw, params=10**6)).calibrated_on.startswith("tiny")
    assert calibrate(replace(raw, params=7 * 10**9)).calibrated_on == "llama3.1-8b on tpu7x-8"
