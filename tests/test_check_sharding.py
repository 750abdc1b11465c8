"""Sharding: every sharded parameter dimension must divide over its mesh axes.

Seed 000: DeepSeek3-671B stops scaling FSDP at 512 because MLA's ``wkv_b`` kernel has a
dimension of 512 (kv_lora_rank); 1024-way FSDP makes JAX raise IndivisibleError.
"""

from __future__ import annotations

import pytest

from tpu_trainer.checks import mesh, sharding
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

DSV3 = "model_name=deepseek3-671b"
SEED_000 = [DSV3, "ici_fsdp_parallelism=1024"]


@pytest.fixture(scope="module")
def configs() -> MaxTextConfigs:
    return MaxTextConfigs.load()


def _request(argv: list[str], device: str, slices: int = 1) -> MaxTextRequest:
    return MaxTextRequest.from_args(argv, Slice.parse(device), slices)


def _check(configs: MaxTextConfigs, request: MaxTextRequest) -> Finding:
    (finding,) = sharding.check_sharding(request, configs, configs.effective(request.args))
    return finding


def test_seed_000_fsdp_1024_fails_on_the_512_dimension(configs: MaxTextConfigs) -> None:
    finding = _check(configs, _request(SEED_000, "tpu7x-8x8x8"))
    assert finding.status is Level.FAIL
    assert finding.message.startswith("decoder/dense_layers/self_attention/wkv_b/kernel: ")
    assert (
        "array axis 0 is partitioned 1024 times, but the dimension size is 512 "
        "(full shape: (512, 3, 128, 256))"
    ) in finding.message
    assert "kv_lora is sharded over fsdp(1024) = 1024" in finding.message
    assert "IndivisibleError" in finding.message
    assert "wq_b/kernel" in finding.message  # q_lora_rank 1536 does not divide by 1024 either


def test_seed_000_ways_out_name_their_cost(configs: MaxTextConfigs) -> None:
    fix = _check(configs, _request(SEED_000, "tpu7x-8x8x8")).fix
    good, _, bad = fix.partition("Not a way out:")
    # data parallelism: the parameters and optimizer state per device double
    assert "`ici_fsdp_parallelism=512 ici_data_parallelism=2`" in good
    assert "7.3 → 14.7 GiB per device (+7.3 GiB of 94.74 GiB usable)" in good
    assert "`ici_fsdp_parallelism=512 ici_tensor_parallelism=2`" in good
    assert "unchanged at 7.3 GiB per device" in good
    assert "2 × tpu7x-4x8x8 (--num-slices 2)" in good
    assert "`ici_fsdp_parallelism=512 dcn_data_parallelism=2`" in good
    # expert parallelism alone does not help: kv_lora is sharded over expert as well
    assert "`ici_fsdp_parallelism=512 ici_expert_parallelism=2`" in bad
    assert "fsdp(512) × expert(2) = 1024" in bad


def test_every_way_out_passes_when_checked_again(configs: MaxTextConfigs) -> None:
    for argv in (SEED_000, [DSV3, "ici_fsdp_parallelism=512", "ici_fsdp_transpose_parallelism=2"]):
        request = _request(argv, "tpu7x-8x8x8")
        setup = sharding.Setup(request.slice, 1, request.args)
        verdict = sharding.evaluate(setup, configs)
        ways = sharding.ways_out(setup, verdict, configs)
        working = [w for w in ways if w.works]
        assert {w.label for w in working} >= {"data parallelism", "multi-slice over DCN"}
        for way in working:
            again = MaxTextRequest(
                args=way.setup.args, slice=way.setup.slice, num_slices=way.setup.num_slices
            )
            assert _check(configs, again).status is Level.PASS, way.changed
            effective = configs.effective(again.args)
            statuses = {f.status for f in mesh.check_mesh(again, configs, effective)}
            assert statuses == {Level.PASS}, way.changed
        assert any(not w.works for w in ways)  # expert parallelism is reported as no way out


def test_fsdp_transpose_variant_moves_the_transpose_factor(configs: MaxTextConfigs) -> None:
    argv = [DSV3, "ici_fsdp_parallelism=512", "ici_fsdp_transpose_parallelism=2"]
    finding = _check(configs, _request(argv, "tpu7x-8x8x8"))
    assert finding.status is Level.FAIL
    assert "fsdp(512) × fsdp_transpose(2) = 1024" in finding.message
    # fsdp 256 × fsdp_transpose 2 × data 2 would not map onto 8x8x8x2: the transpose factor moves
    assert "`ici_fsdp_transpose_parallelism=1 ici_data_parallelism=2`" in finding.fix


def test_fsdp_512_on_512_devices_passes(configs: MaxTextConfigs) -> None:
    for argv in (
        [DSV3, "ici_fsdp_parallelism=512"],
        [DSV3, "ici_fsdp_parallelism=256", "ici_fsdp_transpose_parallelism=2"],
    ):
        finding = _check(configs, _request(argv, "tpu7x-4x8x8"))
        assert finding.status is Level.PASS
        assert "split up to 512 ways" in finding.message
        assert "≈ 14.7 GiB per device" in finding.message


def test_parameter_counts_match_maxtexts(configs: MaxTextConfigs) -> None:
    """MaxText prints 671.026 billion for DeepSeek3-671B; Llama 2 7B has 6.74 billion."""
    for name, billions in (("deepseek3-671b", 671.026), ("llama2-7b", 6.738)):
        params = sharding.model_params(sharding.model_dims(configs.effective({"model_name": name})))
        assert sum(p.size for p in params) / 1e9 == pytest.approx(billions, abs=0.001)
    effective = configs.effective({"model_name": "deepseek3-671b"})
    assert sharding.state_bytes_per_param(effective) == 12  # fp32 weight + 2 Adam moments
    assert sharding.state_bytes_per_param({**effective, "weight_dtype": "bfloat16"}) == 6


# Seen in MaxText 0.2.5's own abstract train state (train_compile's shardings) with
# fsdp=4 fsdp_transpose=2 context=2 tensor=2 expert=2 on tpu7x-64: shape and each
# dimension's mesh axes (size-1 axes dropped, as MaxText's specs show them).
FIVE_AXES = {"fsdp": 4, "fsdp_transpose": 2, "context": 2, "tensor": 2, "expert": 2}
Layout = tuple[tuple[int, ...], tuple[tuple[str, ...], ...]]
OBSERVED: dict[str, dict[str, Layout]] = {
    "deepseek3-671b": {
        "decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/wi_0": (
            (256, 58, 7168, 2048),
            (("expert",), (), ("fsdp", "context"), ("fsdp_transpose", "tensor")),
        ),
        "decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/gate/kernel": (
            (7168, 58, 256),
            (("fsdp", "fsdp_transpose", "context"), (), ()),
        ),
        "decoder/moe_layers/DeepSeekMoeBlock_0/shared_experts/wo/kernel": (
            (2048, 58, 7168),
            (("fsdp_transpose", "tensor"), (), ("fsdp", "context", "expert")),
        ),
        "decoder/moe_layers/self_attention/wkv_b/kernel": (
            (512, 58, 128, 256),
            (("fsdp", "fsdp_transpose", "context", "expert"), (), ("tensor",), ()),
        ),
        "decoder/dense_layers/self_attention/kv_norm/scale": ((512, 3), (("tensor",), ())),
        "token_embedder/embedding": (
            (129280, 7168),
            (("tensor",), ("fsdp", "fsdp_transpose", "context", "expert")),
        ),
    },
    "qwen3-30b-a3b": {
        "decoder/layers/moe_block/wo": (
            (128, 48, 768, 2048),
            (("expert",), (), ("fsdp_transpose", "tensor"), ("fsdp", "context")),
        ),
        "decoder/layers/self_attention/query_norm/scale": ((128, 48), (("tensor",), ())),
    },
}


def test_layout_matches_what_maxtext_builds(configs: MaxTextConfigs) -> None:
    for model, expected in OBSERVED.items():
        args = {"model_name": model}
        effective = configs.effective(args)
        params = {p.path: p for p in sharding.model_params(sharding.model_dims(effective))}
        rules = sharding.logical_rules(configs, args, effective)
        for path, (shape, axes) in expected.items():
            param = params[path]
            assert param.shape == shape, path
            mapped = sharding.to_mesh_axes(param.axes, rules)
            kept = tuple(tuple(a for a in dim if FIVE_AXES.get(a, 1) > 1) for dim in mapped)
            assert kept == axes, path


def test_flax_rules_first_free_rule_wins(configs: MaxTextConfigs) -> None:
    rules = sharding.logical_rules(configs, {}, configs.base)
    moe_wi = sharding.to_mesh_axes(("exp", "embed_moe", "mlp_moe"), rules)
    assert moe_wi[0] == ("expert",)
    assert moe_wi[2][0] == "fsdp_transpose"  # mlp_moe comes first in the rules
    assert "fsdp_transpose" not in moe_wi[1]  # so embed_moe falls back to its second rule
    assert moe_wi[1][0] == "fsdp"
    assert sharding.to_mesh_axes(("dense_layers", "kv_lora"), rules)[0] == ()


def test_rules_merge_model_file_then_command(configs: MaxTextConfigs) -> None:
    llama = {"model_name": "llama2-7b"}
    rules = sharding.logical_rules(configs, llama, configs.effective(llama))
    assert sharding.to_mesh_axes(("norm",), rules) == (("fsdp",),)  # llama2-7b.yml's rule
    given = {**llama, "logical_axis_rules": "[['norm', ['tensor']]]"}
    rules = sharding.logical_rules(configs, given, configs.effective(llama))
    assert sharding.to_mesh_axes(("norm",), rules) == (("tensor",),)
    assert sharding.to_mesh_axes(("embed",), rules)[0][0] == "fsdp"  # others kept
    custom = {"custom_mesh_and_rule": "pure-fsdp"}
    rules = sharding.logical_rules(configs, custom, configs.effective(custom))
    assert all(axes in ((), ("fsdp",)) for _, axes in rules)


def test_too_much_tensor_parallelism_for_the_kv_heads_fails(configs: MaxTextConfigs) -> None:
    argv = ["model_name=llama2-70b", "ici_tensor_parallelism=16", "ici_fsdp_parallelism=4"]
    finding = _check(configs, _request(argv, "tpu7x-64"))
    assert finding.status is Level.FAIL
    assert "self_attention/key/kernel: array axis 2 is partitioned 16 times" in finding.message
    assert "dimension size is 8" in finding.message
    assert "`ici_tensor_parallelism=8 ici_data_parallelism=2`" in finding.fix


def test_unresolvable_mesh_is_left_to_the_mesh_check(configs: MaxTextConfigs) -> None:
    finding = _check(configs, _request([DSV3, "ici_fsdp_parallelism=7"], "tpu7x-8x8x8"))
    assert finding.status is Level.WARN
    assert "not checked" in finding.message
    cpu = _check(configs, _request(["model_name=llama2-7b"], "cpu-1"))
    assert cpu.status is Level.PASS
