"""Tests for ``tpu_trainer.plan.slices`` and ``tpu_trainer.catalog.accelerators``."""

from __future__ import annotations

import pytest

from tpu_trainer.catalog.accelerators import (
    ACCELERATORS,
    Family,
    Precision,
    family_from_prefix,
    known_prefixes,
)
from tpu_trainer.errors import InputError, TopologyError, TpuTrainerError
from tpu_trainer.plan.slices import Slice, topology_is_valid, valid_topologies

pytestmark = pytest.mark.unit

# ---------------------------------------------------------------------------
# Seed 000: the topology table
# ---------------------------------------------------------------------------

SEED_000_TABLE = [
    # device type, chips, JAX devices, hosts, Kueue flavor, quota
    ("tpu7x-4x4x8", 128, 256, 32, "1xtpu7x-256", 128),
    ("tpu7x-4x8x8", 256, 512, 64, "1xtpu7x-512", 256),
    ("tpu7x-8x8x8", 512, 1024, 128, "1xtpu7x-1024", 512),
    ("tpu7x-8x8x16", 1024, 2048, 256, "1xtpu7x-2048", 1024),
]


@pytest.mark.parametrize(
    ("device_type", "chips", "jax_devices", "hosts", "flavor", "quota"), SEED_000_TABLE
)
def test_slice_parse_seed000_table_matches_chips_devices_hosts_flavor_quota(
    device_type: str, chips: int, jax_devices: int, hosts: int, flavor: str, quota: int
) -> None:
    s = Slice.parse(device_type)
    assert s.chips == chips
    assert s.jax_devices == jax_devices
    assert s.hosts == hosts
    assert s.kueue_flavor() == flavor
    assert s.kueue_quota() == quota
    assert s.device_type == device_type
    assert s.multi_host


@pytest.mark.parametrize(
    ("device_type", "chips", "jax_devices", "hosts", "flavor", "quota"), SEED_000_TABLE
)
def test_slice_parse_seed000_number_form_gives_same_row(
    device_type: str, chips: int, jax_devices: int, hosts: int, flavor: str, quota: int
) -> None:
    number_form = flavor.removeprefix("1x")
    s = Slice.parse(number_form)
    assert s == Slice.parse(device_type)
    assert (s.chips, s.jax_devices, s.hosts, s.kueue_flavor(), s.kueue_quota()) == (
        chips,
        jax_devices,
        hosts,
        flavor,
        quota,
    )
    assert s.device_type_number == number_form


# ---------------------------------------------------------------------------
# Seed 001: the number form counts TensorCores on tpu7x
# ---------------------------------------------------------------------------


def test_slice_parse_number_form_counts_tensorcores_on_tpu7x() -> None:
    s = Slice.parse("tpu7x-64")
    assert s.chips == 32
    assert s.tensorcores == 64
    assert s.topology_name == "2x4x4"
    assert s.hosts == 8
    assert s == Slice.parse("tpu7x-2x4x4")


def test_slice_workload_policy_tpu7x_64_names_number_form_and_topology() -> None:
    assert Slice.parse("tpu7x-64").workload_policy == "tpu7x-64-2x4x4-placement-policy"
    assert Slice.parse("tpu7x-2x4x4").workload_policy == "tpu7x-64-2x4x4-placement-policy"


def test_slice_parse_tpu7x_32_is_16_chips_not_32() -> None:
    # The seed's mistake: it read tpu7x-32 as 32 chips; N counts TensorCores.
    s = Slice.parse("tpu7x-32")
    assert s.chips == 16
    assert s.topology_name == "2x2x4"
    assert s.hosts == 4
    assert s.xpk_number == 32


def test_slice_configmap_entry_tpu7x_4x4x8_is_number_form_and_hosts() -> None:
    assert Slice.parse("tpu7x-4x4x8").configmap_entry() == ("tpu7x-256", "32")


def test_slice_two_slices_double_flavor_quota_and_configmap_hosts() -> None:
    s = Slice.parse("tpu7x-4x4x8")
    assert s.kueue_flavor(2) == "2xtpu7x-256"
    assert s.kueue_quota(2) == 256
    assert s.configmap_entry(2) == ("tpu7x-256", "64")


# ---------------------------------------------------------------------------
# Number form and topology form, across families
# ---------------------------------------------------------------------------


def test_slice_parse_topology_and_number_forms_are_equal() -> None:
    a = Slice.parse("tpu7x-4x4x8")
    b = Slice.parse("tpu7x-256")
    assert a == b
    assert a.topology == b.topology == (4, 4, 8)


def test_slice_equal_slices_hash_equal_and_work_as_set_members() -> None:
    a = Slice.parse("tpu7x-4x4x8")
    b = Slice.parse("tpu7x-256")
    assert hash(a) == hash(b)
    assert len({a, b}) == 1


def test_slice_parse_v6e_number_form_counts_chips() -> None:
    s = Slice.parse("v6e-16")
    assert s.family is Family.V6E
    assert s.chips == 16
    assert s.topology_name == "4x4"
    assert s.hosts == 4
    assert s.jax_devices == 16
    assert s.device_type == "v6e-4x4"


def test_slice_parse_v5p_8_is_four_megacore_chips() -> None:
    s = Slice.parse("v5p-8")
    assert s.chips == 4
    assert s.topology_name == "2x2x1"
    assert s.jax_devices == 4  # megacore: one JAX device per chip
    assert s.tensorcores == 8
    assert s.hosts == 1


def test_slice_parse_v5litepod_16_is_4x4() -> None:
    s = Slice.parse("v5litepod-16")
    assert s.family is Family.V5E
    assert s.topology_name == "4x4"
    assert s.chips == 16


def test_slice_parse_v4_8_is_2x2x1() -> None:
    s = Slice.parse("v4-8")
    assert s.family is Family.V4
    assert s.topology_name == "2x2x1"
    assert s.chips == 4
    assert s.jax_devices == 4


def test_slice_parse_case_and_whitespace_are_ignored() -> None:
    assert Slice.parse("  TPU7X-4x4x8 ") == Slice.parse("tpu7x-4x4x8")


@pytest.mark.parametrize("alias", ["tpu7x-256", "v7-256", "v7x-4x4x8", "ironwood-4x4x8"])
def test_slice_parse_v7_aliases_give_tpu7x_device_type(alias: str) -> None:
    s = Slice.parse(alias)
    assert s.family is Family.V7
    assert s.device_type == "tpu7x-4x4x8"


def test_slice_parse_v4_accepts_any_side_order() -> None:
    s = Slice.parse("v4-8x4x4")
    assert s.topology_name == "8x4x4"
    assert s.chips == 128
    assert s.device_type_number == "v4-256"


def test_slice_of_matches_parse_and_str_is_topology_form() -> None:
    s = Slice.of(Family.V7, "4x8x8")
    assert s == Slice.parse("tpu7x-4x8x8")
    assert str(s) == "tpu7x-4x8x8"


# ---------------------------------------------------------------------------
# Hosts, machine types and workload policies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device_type", ["tpu7x-2x2x1", "v6e-4", "v5p-8", "v4-8", "v6e-1"])
def test_slice_single_host_has_no_workload_policy(device_type: str) -> None:
    s = Slice.parse(device_type)
    assert s.hosts == 1
    assert not s.multi_host
    assert s.workload_policy is None


def test_slice_single_chip_tpu7x_uses_1t_machine_type() -> None:
    s = Slice.parse("tpu7x-1x1x1")
    assert s.chips == 1
    assert s.hosts == 1
    assert s.jax_devices == 2
    assert s.machine_type == "tpu7x-standard-1t"
    assert s.workload_policy is None
    assert s.device_type_number == "tpu7x-2"
    assert Slice.parse("tpu7x-2") == s


def test_slice_four_chip_tpu7x_uses_4t_machine_type() -> None:
    assert Slice.parse("tpu7x-2x2x1").machine_type == "tpu7x-standard-4t"


def test_slice_multi_host_v6e_has_no_workload_policy() -> None:
    s = Slice.parse("v6e-4x8")
    assert s.hosts == 8
    assert s.multi_host
    assert s.workload_policy is None
    assert s.machine_type == "ct6e-standard-4t"


def test_slice_multi_host_only_v7_requires_workload_policy() -> None:
    needing = {f for f, acc in ACCELERATORS.items() if acc.multi_host_needs_workload_policy}
    assert needing == {Family.V7}
    assert Slice.parse("v5p-2x2x2").workload_policy is None
    assert Slice.parse("tpu7x-2x2x2").workload_policy == "tpu7x-16-2x2x2-placement-policy"


# ---------------------------------------------------------------------------
# Throughput and memory
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_type", "precision", "tflops"),
    [
        ("tpu7x-4x4x8", Precision.BF16, 2307.0),
        ("tpu7x-4x4x8", Precision.FP8, 4614.0),
        ("v6e-4x4", Precision.BF16, 918.0),
        ("v6e-4x4", Precision.FP8, 1836.0),
        ("v4-8", Precision.BF16, 275.0),
        ("v4-8", Precision.FP8, 275.0),  # no fp8 on v4: falls back to bf16
    ],
)
def test_slice_peak_tflops_per_chip_by_family_and_precision(
    device_type: str, precision: Precision, tflops: float
) -> None:
    assert Slice.parse(device_type).peak_tflops_per_chip(precision) == tflops


def test_accelerator_v4_has_no_fp8_figure_and_falls_back() -> None:
    v4 = ACCELERATORS[Family.V4]
    assert Precision.FP8 not in v4.peak_tflops
    assert v4.peak_tflops_per_chip(Precision.FP8) == v4.peak_tflops[Precision.BF16]


def test_slice_hbm_v7_is_192_gb_per_chip() -> None:
    assert Slice.parse("tpu7x-4x4x8").hbm_gb_per_chip == 192
    assert ACCELERATORS[Family.V7].hbm_gb_per_chip == 192


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_topology_error_is_input_error_and_tpu_trainer_error() -> None:
    assert issubclass(TopologyError, InputError)
    assert issubclass(TopologyError, TpuTrainerError)
    with pytest.raises(InputError):
        Slice.parse("tpu7x-3x3x3")
    with pytest.raises(TpuTrainerError):
        Slice.parse("tpu7x-3x3x3")


def test_slice_parse_impossible_tpu7x_topology_fix_lists_valid_ones() -> None:
    with pytest.raises(TopologyError) as info:
        Slice.parse("tpu7x-3x3x3")
    assert "3x3x3" in info.value.message
    assert "4x4x8" in info.value.fix
    assert "2x2x1" in info.value.fix
    assert "3x3x3" not in info.value.fix


def test_slice_parse_impossible_v6e_topology_fix_lists_all_v6e_topologies() -> None:
    with pytest.raises(TopologyError) as info:
        Slice.parse("v6e-3x3")
    for topology in ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"):
        assert topology in info.value.fix


@pytest.mark.parametrize(
    "device_type", ["tpu7x-4x4", "v6e-4x4x4", "tpu7x-4x4x7", "tpu7x-8x8x4", "tpu7x-24x24x24"]
)
def test_slice_parse_wrong_shape_or_size_raises_topology_error(device_type: str) -> None:
    with pytest.raises(TopologyError):
        Slice.parse(device_type)


def test_slice_parse_bad_number_form_says_n_counts_tensorcores() -> None:
    with pytest.raises(TopologyError) as info:
        Slice.parse("tpu7x-6")
    assert "TensorCores" in info.value.message
    assert "tpu7x-8 (2x2x1)" in info.value.fix


def test_slice_parse_bad_v6e_number_form_says_n_counts_chips() -> None:
    with pytest.raises(TopologyError) as info:
        Slice.parse("v6e-6")
    assert "chips" in info.value.message
    assert "TensorCores" not in info.value.message


def test_slice_parse_odd_tensorcore_count_raises_topology_error() -> None:
    with pytest.raises(TopologyError, match="TensorCores"):
        Slice.parse("v5p-7")


@pytest.mark.parametrize("text", ["foo-8", "", "tpu7x-", "tpu7x", "gpu-4x4"])
def test_slice_parse_unknown_prefix_or_garbage_lists_known_prefixes(text: str) -> None:
    with pytest.raises(TopologyError) as info:
        Slice.parse(text)
    assert "is not a TPU device type" in info.value.message
    for prefix in ("tpu7x", "v6e", "v5p", "v5litepod", "v4"):
        assert prefix in info.value.fix


def test_slice_of_non_numeric_topology_raises_topology_error() -> None:
    with pytest.raises(TopologyError):
        Slice.of(Family.V7, "axbxc")


# ---------------------------------------------------------------------------
# Ambiguous number forms
# ---------------------------------------------------------------------------


def test_slice_parse_ambiguous_tpu7x_2048_resolves_8x8x16_with_alternatives() -> None:
    s = Slice.parse("tpu7x-2048")
    assert s.topology_name == "8x8x16"
    assert s.alternatives
    assert "4x4x64" in s.alternatives
    assert "8x8x16" not in s.alternatives
    assert s == Slice.parse("tpu7x-8x8x16")  # alternatives do not take part in equality


def test_slice_parse_ambiguous_tpu7x_512_resolves_4x8x8() -> None:
    s = Slice.parse("tpu7x-512")
    assert s.topology_name == "4x8x8"
    assert s.alternatives == ("4x4x16",)


def test_slice_parse_topology_form_has_no_alternatives() -> None:
    assert Slice.parse("tpu7x-8x8x16").alternatives == ()


# ---------------------------------------------------------------------------
# Catalog helpers
# ---------------------------------------------------------------------------


def test_valid_topologies_are_ordered_by_chips_and_all_valid() -> None:
    acc = ACCELERATORS[Family.V7]
    shown = valid_topologies(acc)
    chips = [_prod(t) for t in shown]
    assert chips == sorted(chips)
    assert shown[0] == "1x1x1"
    assert len(shown) == len(set(shown))
    assert all(topology_is_valid(acc, tuple(int(d) for d in t.split("x"))) for t in shown)


def test_valid_topologies_limit_chips_excludes_bigger_slices() -> None:
    acc = ACCELERATORS[Family.V7]
    limited = valid_topologies(acc, limit_chips=64)
    assert limited == ["1x1x1", "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4"]


def test_topology_is_valid_enforces_order_except_on_v4() -> None:
    assert not topology_is_valid(ACCELERATORS[Family.V7], (8, 8, 4))
    assert topology_is_valid(ACCELERATORS[Family.V4], (8, 4, 4))
    assert topology_is_valid(ACCELERATORS[Family.V7], (12, 12, 16))
    assert not topology_is_valid(ACCELERATORS[Family.V7], (24, 24, 24))  # 216 cubes > 144


def test_family_from_prefix_knows_aliases_and_rejects_others() -> None:
    assert family_from_prefix("IRONWOOD") is Family.V7
    assert family_from_prefix("v5litepod") is Family.V5E
    assert family_from_prefix("foo") is None
    assert set(known_prefixes()) >= {"tpu7x", "v6e", "v5p", "v5litepod", "v4"}


def _prod(topology: str) -> int:
    out = 1
    for d in topology.split("x"):
        out *= int(d)
    return out
