"""Mesh: MaxText's ICI/DCN products and JAX's logical → physical mapping, before any TPU.

Seed 001 lost a run to ``ici_fsdp=8 tensor=4 context=2`` on tpu7x-64; the sample log shows the
same failure for ``fsdp=8 tensor=2 expert=4``. The pure check predicts JAX's exact text; one
test asks JAX itself, in the MaxText runtime, and compares on every shape.
"""

from __future__ import annotations

import math
import time

import pytest

from tpu_trainer.checks import mesh
from tpu_trainer.checks.mesh_runtime import (
    JaxMeshResult,
    JaxTopology,
    ask_jax,
    check_mesh_with_jax,
    jax_findings,
)
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice
from tpu_trainer.runtime.manager import MAXTEXT, is_installed

SEED_001 = ["ici_fsdp_parallelism=8", "ici_tensor_parallelism=4", "ici_context_parallelism=2"]
SEED_001_FIXED = [
    "ici_fsdp_parallelism=16",
    "ici_tensor_parallelism=4",
    "ici_context_parallelism=1",
]
SAMPLE = ["ici_fsdp_parallelism=8", "ici_tensor_parallelism=2", "ici_expert_parallelism=4"]

# The NotImplementedError line of samples/maxtext-0.2.5-aot_tpu7x-64_badmesh.log, verbatim.
SAMPLE_ERROR = (
    "Failed to find assignment for logical_axis_index 8 of size 2 with remaining assignable "
    "mesh [0, 4, 4, 0]. The size of each axis in your logical mesh must be equal to the product "
    "of some subset of the physical mesh axis sizes. E.g. logical mesh (4, 16) is compatible "
    "with physical mesh 4x4x4 since 4=4 and 16=4x4. If you want to split physical axes, set  "
    "allow_split_physical_axes to True."
)


@pytest.fixture(scope="module")
def configs() -> MaxTextConfigs:
    return MaxTextConfigs.load()


def _check(
    configs: MaxTextConfigs, argv: list[str], device: str = "tpu7x-64", slices: int = 1
) -> dict[str, Finding]:
    request = MaxTextRequest.from_args(argv, Slice.parse(device), slices)
    return {f.name: f for f in mesh.check_mesh(request, configs, configs.effective(request.args))}


def _resolved(configs: MaxTextConfigs, argv: list[str], device: str) -> mesh.ResolvedMesh:
    request = MaxTextRequest.from_args(argv, Slice.parse(device))
    effective = configs.effective(request.args)
    return mesh.resolve_mesh(effective, request.devices_per_slice, 1)


def _proposals(fix: str) -> list[dict[str, str]]:
    """The backquoted ``key=value`` groups of a fix text."""
    groups = fix.split("`")[1::2]
    return [dict(word.split("=", 1) for word in group.split()) for group in groups]


# ---- the mapping rule -------------------------------------------------------------------------


@pytest.mark.unit
def test_seed_001_context_axis_fails_with_jaxs_text(configs: MaxTextConfigs) -> None:
    found = _check(configs, SEED_001)
    assert found["mesh-ici"].status is Level.PASS
    mapping = found["mesh-mapping"]
    assert mapping.status is Level.FAIL
    expected = SAMPLE_ERROR.replace("logical_axis_index 8", "logical_axis_index 5")
    assert f"NotImplementedError: {expected}" in mapping.message
    assert "physical mesh [2, 4, 4, 2] (x, y, z, core)" in mapping.message
    assert "after [tensor=4→x×core], context=2" in mapping.message


@pytest.mark.unit
def test_sample_expert_case_reproduces_the_logged_error(configs: MaxTextConfigs) -> None:
    resolved = _resolved(configs, SAMPLE, "tpu7x-64")
    assert resolved.ici_shape == (1, 1, 1, 8, 1, 1, 1, 1, 2, 1, 4, 1)
    found = mesh.assign((2, 4, 4, 2), resolved.ici_shape, core_first=True)
    assert not found.ok
    assert found.error == SAMPLE_ERROR
    assert found.axes[10] == (0, 3)  # expert=4 took x × core first
    assert _check(configs, SAMPLE)["mesh-mapping"].message.endswith(SAMPLE_ERROR)


@pytest.mark.unit
def test_seed_replacement_maps(configs: MaxTextConfigs) -> None:
    mapping = _check(configs, SEED_001_FIXED)["mesh-mapping"]
    assert mapping.status is Level.PASS
    assert "fsdp=16→y×z, tensor=4→x×core" in mapping.message


@pytest.mark.unit
def test_v7_gives_the_most_intensive_axis_the_core_axis_first() -> None:
    shape = (1, 1, 1, 32, 1, 1, 1, 1, 2, 1, 1, 1)  # fsdp=32, tensor=2
    v7 = mesh.assign((2, 4, 4, 2), shape, core_first=True)
    assert v7.axes[8] == (3,)  # tensor on the two cores of a chip
    assert v7.axes[3] == (0, 1, 2)
    plain = mesh.assign((2, 4, 4, 2), shape, core_first=False)
    assert plain.axes[8] == (0,)  # in plain order the first axis of size 2 wins
    # a size-1 axis takes the size-1 z axis before a size-2 axis finds nothing left of size 2
    assert mesh.assign((4, 4, 1), (2, 1), core_first=False).remaining == (4, 4, 0)


@pytest.mark.unit
def test_proposals_keep_the_users_axes_map_and_rank_the_seeds_move_first(
    configs: MaxTextConfigs,
) -> None:
    for argv, first in (
        (SEED_001, {"ici_fsdp_parallelism": "16", "ici_context_parallelism": "1"}),
        (SAMPLE, {"ici_fsdp_parallelism": "16", "ici_tensor_parallelism": "1"}),
    ):
        fix = _check(configs, argv)["mesh-mapping"].fix
        proposals = _proposals(fix)
        assert 1 <= len(proposals) <= 3
        assert first.items() <= proposals[0].items()
        given = {k for k, _ in (w.split("=") for w in argv)}
        for proposal in proposals:
            assert set(proposal) == given  # the user's axes, nothing new
            verdict = _check(configs, [f"{k}={v}" for k, v in proposal.items()])
            assert verdict["mesh-mapping"].status is Level.PASS, proposal


@pytest.mark.unit
def test_physical_meshes_follow_jax() -> None:
    expected = {
        "tpu7x-64": (2, 4, 4, 2),
        "tpu7x-8x8x8": (8, 8, 8, 2),
        "tpu7x-2": (1, 1, 1, 2),
        "v6e-16": (4, 4, 1),
        "v5p-16": (2, 2, 2),
        "v4-16": (2, 2, 2),
    }
    for device, shape in expected.items():
        physical = mesh.physical_mesh(Slice.parse(device))
        assert physical is not None
        assert physical.shape == shape
        assert physical.core_first is (len(shape) == 4)
    assert mesh.physical_mesh(Slice.parse("cpu-1")) is None


@pytest.mark.unit
def test_small_slices_take_any_shape(configs: MaxTextConfigs) -> None:
    """JAX reorders tpu7x slices of up to 32 devices (x, y ≤ 2) in rings, without matching."""
    argv = ["ici_fsdp_parallelism=2", "ici_context_parallelism=2", "ici_tensor_parallelism=2"]
    mapping = _check(configs, argv, "tpu7x-8")["mesh-mapping"]
    assert mapping.status is Level.PASS
    assert "fixed rings" in mapping.message
    v6e = ["ici_fsdp_parallelism=8", "ici_tensor_parallelism=2"]
    assert _check(configs, v6e, "v6e-16")["mesh-mapping"].status is Level.FAIL
    assert _check(configs, ["ici_fsdp_parallelism=16"], "v6e-16")["mesh-mapping"].status is (
        Level.PASS
    )


@pytest.mark.unit
def test_cpu_slice_has_one_device_and_no_physical_mesh(configs: MaxTextConfigs) -> None:
    found = _check(configs, [], "cpu-1")
    assert found["mesh-ici"].status is Level.PASS
    assert "= 1 JAX device per slice" in found["mesh-ici"].message
    assert found["mesh-mapping"].status is Level.PASS
    assert _check(configs, ["ici_tensor_parallelism=2"], "cpu-1")["mesh-ici"].status is (Level.FAIL)


# ---- products and -1 ------------------------------------------------------------------------


@pytest.mark.unit
def test_product_mismatch_names_both_numbers_and_proposes_working_values(
    configs: MaxTextConfigs,
) -> None:
    finding = _check(configs, ["ici_fsdp_parallelism=8", "ici_tensor_parallelism=4"])["mesh-ici"]
    assert finding.status is Level.FAIL
    assert "devices per slice 64 does not match the product of the ICI parallelism 32" in (
        finding.message
    )
    assert "fsdp(8) × tensor(4)" in finding.message
    proposals = _proposals(finding.fix)
    assert proposals[0] == {"ici_fsdp_parallelism": "16", "ici_tensor_parallelism": "4"}
    for proposal in proposals:
        assert math.prod(int(v) for v in proposal.values()) == 64
        argv = [f"{k}={v}" for k, v in proposal.items()]
        assert _check(configs, argv)["mesh-mapping"].status is Level.PASS


@pytest.mark.unit
def test_minus_one_is_filled_the_way_maxtext_does(configs: MaxTextConfigs) -> None:
    resolved = _resolved(configs, ["ici_tensor_parallelism=4"], "tpu7x-64")  # fsdp is -1
    assert resolved.sizes["fsdp"] == 16
    assert resolved.filled == ("ici_fsdp_parallelism=-1 → 16",)
    ok = _check(configs, ["ici_tensor_parallelism=4"])["mesh-ici"]
    assert ok.status is Level.PASS
    assert "ici_fsdp_parallelism=-1 → 16" in ok.message
    not_whole = _check(configs, ["ici_tensor_parallelism=3"])["mesh-ici"]
    assert not_whole.status is Level.FAIL
    assert "64 devices per slice ÷ 3" in not_whole.message
    two = _check(configs, ["ici_tensor_parallelism=-1"])["mesh-ici"]
    assert two.status is Level.FAIL
    assert "more than one ICI axis is -1" in two.message
    with pytest.raises(mesh.MeshError, match="not a whole number"):
        mesh.fill_unspecified([-1, 128], 64, "ICI")
    assert mesh.fill_unspecified([2, -1, 4], 64, "ICI") == (2, 8, 4)


@pytest.mark.unit
def test_dcn_product_counts_only_with_several_slices(configs: MaxTextConfigs) -> None:
    two = _check(configs, ["ici_tensor_parallelism=4"], slices=2)
    assert two["mesh-dcn"].status is Level.PASS
    assert "DCN data(2) = 2 slices" in two["mesh-dcn"].message
    bad = _check(configs, ["dcn_fsdp_parallelism=4", "dcn_data_parallelism=1"], slices=2)
    assert bad["mesh-dcn"].status is Level.FAIL
    assert "slices 2 does not match the product of the DCN parallelism 4" in bad["mesh-dcn"].message
    assert "dcn_data_parallelism=2" in bad["mesh-dcn"].fix
    ignored = _check(configs, ["dcn_fsdp_parallelism=4"], slices=1)
    assert ignored["mesh-dcn"].status is Level.WARN


@pytest.mark.unit
def test_axis_settings_follow_maxtexts_table(configs: MaxTextConfigs) -> None:
    assert mesh.setting_key("stage", "ici") == "ici_pipeline_parallelism"
    assert mesh.setting_key("model", "dcn") == "dcn_tensor_parallelism"
    assert mesh.setting_key("attn_dp", "ici") is None
    names = mesh.mesh_axes(configs.base)
    assert names[5] == "context"
    assert names[8] == "tensor"
    resolved = _resolved(configs, ["ici_pipeline_parallelism=4"], "tpu7x-64")
    assert resolved.sizes["stage"] == 4
    bad = _check(configs, ["ici_tensor_parallelism=two"])["mesh-settings"]
    assert bad.status is Level.FAIL


@pytest.mark.unit
def test_custom_mesh_file_and_split_axes(configs: MaxTextConfigs) -> None:
    found = _check(configs, ["custom_mesh_and_rule=pure-fsdp"])
    assert "ICI fsdp(64)" in found["mesh-ici"].message
    unknown = _check(configs, ["custom_mesh_and_rule=no-such-rule"])["mesh-settings"]
    assert unknown.status is Level.FAIL
    assert "pure-fsdp" in unknown.fix
    split = _check(configs, [*SEED_001, "allow_split_physical_axes=true"])["mesh-mapping"]
    assert split.status is Level.PASS


# ---- JAX's own answer -------------------------------------------------------------------------


def _fake_answer(shape: tuple[int, ...], ok: bool, message: str) -> JaxTopology:
    result = JaxMeshResult(shape, ok, "" if ok else "NotImplementedError", message)
    return JaxTopology("tpu7x:2x4x4", "TPU7x", 64, (2, 4, 4, 2), (result,))


@pytest.mark.unit
def test_jax_answers_become_findings_and_disagreements_warn(configs: MaxTextConfigs) -> None:
    resolved = _resolved(configs, SEED_001, "tpu7x-64")
    target = mesh.mesh_target(Slice.parse("tpu7x-64"), configs.base)
    expected = mesh.assign((2, 4, 4, 2), resolved.ici_shape, core_first=True).error
    agree = jax_findings(
        resolved, target, _fake_answer(resolved.ici_shape, False, expected), [], 1.0
    )
    assert [f.status for f in agree] == [Level.FAIL]
    assert agree[0].message.endswith(f"NotImplementedError: {expected}")
    differ = jax_findings(resolved, target, _fake_answer(resolved.ici_shape, True, ""), [], 1.0)
    assert [f.status for f in differ] == [Level.PASS, Level.WARN]
    assert "disagrees with this JAX" in differ[1].message


def _require_runtime() -> None:
    if not is_installed(MAXTEXT):
        pytest.fail(
            "this test asks JAX in the MaxText runtime, which is not installed: run "
            "`tpu-trainer runtime install maxtext` (CI installs it before the tests)"
        )


AGREEMENT = {
    "tpu7x-64": [
        SEED_001,
        SAMPLE,
        SEED_001_FIXED,
        ["ici_fsdp_parallelism=64"],
        ["ici_fsdp_parallelism=4", "ici_context_parallelism=4", "ici_tensor_parallelism=4"],
        ["ici_data_parallelism=2", "ici_fsdp_parallelism=16", "ici_tensor_parallelism=2"],
        ["ici_fsdp_parallelism=32", "ici_expert_parallelism=2"],
    ],
    "tpu7x-8x8x8": [
        ["ici_fsdp_parallelism=512", "ici_data_parallelism=2"],
        ["ici_fsdp_parallelism=256", "ici_fsdp_transpose_parallelism=2", "ici_data_parallelism=2"],
    ],
    "tpu7x-16": [
        ["ici_fsdp_parallelism=4", "ici_context_parallelism=2", "ici_tensor_parallelism=2"]
    ],
    "tpu7x-2": [["ici_tensor_parallelism=2"]],
    "v6e-16": [
        ["ici_fsdp_parallelism=8", "ici_tensor_parallelism=2"],
        ["ici_fsdp_parallelism=4", "ici_tensor_parallelism=4"],
    ],
    "v5p-128": [["ici_fsdp_parallelism=16", "ici_tensor_parallelism=4"]],
}


@pytest.mark.runtime
def test_pure_mapping_agrees_with_jax_on_every_shape(configs: MaxTextConfigs) -> None:
    _require_runtime()
    cases = []
    for device, argvs in AGREEMENT.items():
        slice_ = Slice.parse(device)
        shapes = [_resolved(configs, argv, device).ici_shape for argv in argvs]
        cases.append((slice_, shapes))
    started = time.perf_counter()
    answers = ask_jax(SubprocessRunner(), cases)
    seconds = time.perf_counter() - started
    assert len(answers) == len(cases)
    verdicts = []
    for (slice_, shapes), answer in zip(cases, answers, strict=True):
        assert not answer.error, answer.error
        physical = mesh.physical_mesh(slice_)
        assert physical is not None
        assert answer.physical_mesh == physical.shape
        target = mesh.MeshTarget(slice_, physical)
        for shape in shapes:
            result = answer.result(shape)
            assert result is not None
            predicted = target.maps(shape)
            assert (predicted is None or predicted.ok) == result.ok, (slice_, shape)
            if not result.ok:
                assert predicted is not None
                assert result.error == "NotImplementedError"
                assert result.message == predicted.error
            verdicts.append(result.ok)
    assert len(verdicts) >= 10
    assert True in verdicts and False in verdicts
    assert seconds < 60


@pytest.mark.runtime
def test_runtime_check_reports_jaxs_failure_and_jax_checked_proposals(
    configs: MaxTextConfigs,
) -> None:
    _require_runtime()
    request = MaxTextRequest.from_args(SEED_001, Slice.parse("tpu7x-64"))
    findings = check_mesh_with_jax(request, SubprocessRunner(), configs)
    assert [f.status for f in findings] == [Level.FAIL]
    finding = findings[0]
    assert finding.name == "mesh-mapping (JAX)"
    assert "logical_axis_index 5 of size 2 with remaining assignable mesh [0, 4, 4, 0]" in (
        finding.message
    )
    assert "TPU7x, physical mesh [2, 4, 4, 2]" in finding.message
    proposals = _proposals(finding.fix)
    assert proposals[0]["ici_fsdp_parallelism"] == "16"
    assert proposals[0]["ici_context_parallelism"] == "1"
    cpu = MaxTextRequest.from_args([], Slice.parse("cpu-1"))
    assert check_mesh_with_jax(cpu, SubprocessRunner(), configs) == []
