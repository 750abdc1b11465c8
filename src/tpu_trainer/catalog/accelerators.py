"""Cloud TPU hardware facts, as data.

One row per TPU family. Numbers are per chip unless a name says otherwise.
Sources: Cloud TPU documentation, xpk's system characteristics, and XLA's own
usable-HBM figures as printed by MaxText's AOT compiler.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    """TPU generations the tool plans for."""

    V4 = "v4"
    V5E = "v5e"
    V5P = "v5p"
    V6E = "v6e"
    V7 = "v7"
    CPU = "cpu"
    """This machine's CPU, for local runs (one JAX device, no peak figure)."""


class Precision(StrEnum):
    """Training number formats that have their own peak throughput."""

    BF16 = "bf16"
    FP8 = "fp8"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyRule:
    """Which topologies a family accepts (mirrors how xpk enumerates them)."""

    dims: int
    """2 for the 2D-torus families (v5e, v6e), 3 for the 3D ones."""
    listed: tuple[str, ...]
    """Topologies accepted as they are (small slices, and every 2D one)."""
    cube_max: int = 0
    """3D families: AxBxC with each side a multiple of 4 (4..256) and at most this many 4x4x4 cubes."""
    nondecreasing: bool = True
    """3D families: sides must satisfy A <= B <= C (v4 accepts any order)."""
    number_form_defaults: frozenset[str] = frozenset()
    """Where several topologies share a chip count, the one xpk means by the number form
    (``tpu7x-512`` is 4x8x8, not 4x4x16); otherwise xpk takes the first in (A, B, C) order."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Accelerator:
    """Facts about one TPU family (one instance per family: compared and hashed by identity)."""

    family: Family
    name: str
    """Marketing name, for reports: "TPU v7 (Ironwood)"."""
    xpk_prefix: str
    """Prefix of xpk's device types: ``tpu7x``, ``v5litepod``..."""
    xpk_number_counts_tensorcores: bool
    """True when the N of ``<prefix>-N`` counts TensorCores, False when it counts chips."""
    tensorcores_per_chip: int
    jax_devices_per_chip: int
    """JAX devices per chip: 2 on TPU v7, 1 elsewhere (v4/v5p are megacore)."""
    chips_per_host: int
    hbm_gb_per_chip: int
    usable_hbm_gib_per_device: float | None
    """XLA's usable HBM per JAX device, when it has been measured."""
    peak_tflops: dict[Precision, float]
    """Peak dense TFLOP/s per chip, by precision (fp8 means fp8 or int8, as the hardware offers)."""
    gke_accelerator: str
    """Value of the ``cloud.google.com/gke-tpu-accelerator`` node label."""
    machine_type: str
    """GKE/GCE machine type of a 4-chip host."""
    machine_type_single_chip: str | None
    """Machine type of a 1-chip slice, where the family has one."""
    other_machine_types: tuple[str, ...]
    """Other machine types of a 4-chip host (tpu7x-ultranet-4t has RDMA NICs)."""
    multi_host_needs_workload_policy: bool
    """Multi-host node pools need a GCE workload policy (TPU v7)."""
    tpu_vm_runtime: str | None
    """``--version`` for ``gcloud compute tpus tpu-vm create``; None where the Cloud TPU API
    does not offer the family as a TPU VM (TPU v7 is offered through GKE and Compute Engine)."""
    topology: TopologyRule

    def peak_tflops_per_chip(self, precision: Precision) -> float:
        """Peak TFLOP/s per chip for ``precision`` (bf16 when the family has no fp8 figure;
        0 where there is no peak figure at all, as on a CPU)."""
        return self.peak_tflops.get(precision, self.peak_tflops.get(Precision.BF16, 0.0))


_SMALL_3D = ("2x2x1", "2x2x2", "2x2x4", "2x4x4")

# xpk's preferred large topologies (v5p lacks 16x16x32)
_LARGE_3D_DEFAULTS = frozenset(
    {
        "4x8x8",
        "4x8x12",
        "4x8x20",
        "4x8x28",
        "4x8x44",
        "4x8x52",
        "4x8x68",
        "4x8x76",
        "4x8x92",
        "4x8x116",
        "4x8x124",
        "4x12x12",
        "4x12x20",
        "4x12x28",
        "4x12x44",
        "4x12x52",
        "4x12x68",
        "4x12x76",
        "4x20x20",
        "4x20x28",
        "4x20x44",
        "4x28x28",
        "8x8x8",
        "8x8x12",
        "8x8x16",
        "8x8x20",
        "8x8x28",
        "8x8x44",
        "8x8x52",
        "8x8x68",
        "8x8x76",
        "8x8x92",
        "8x12x12",
        "8x12x16",
        "8x12x20",
        "8x12x28",
        "8x12x44",
        "8x12x52",
        "8x16x16",
        "8x16x20",
        "8x16x28",
        "8x16x44",
        "8x20x20",
        "8x20x28",
        "12x12x12",
        "12x12x16",
        "12x12x20",
        "12x12x24",
        "12x12x28",
        "12x12x36",
        "12x16x16",
        "12x16x20",
        "12x16x24",
        "12x16x28",
        "12x20x20",
        "12x20x24",
        "12x24x24",
        "16x16x16",
        "16x16x20",
        "16x16x24",
        "16x16x32",
        "16x20x28",
        "16x24x24",
    }
)
_V5P_DEFAULTS = _LARGE_3D_DEFAULTS - {"16x16x32"}
_V4_DEFAULTS = frozenset({"4x8x8", "8x8x8", "8x8x12", "8x8x16", "8x16x16"})

ACCELERATORS: dict[Family, Accelerator] = {
    Family.V7: Accelerator(
        family=Family.V7,
        name="TPU v7 (Ironwood)",
        xpk_prefix="tpu7x",
        xpk_number_counts_tensorcores=True,
        tensorcores_per_chip=2,
        jax_devices_per_chip=2,
        chips_per_host=4,
        hbm_gb_per_chip=192,
        usable_hbm_gib_per_device=94.74,
        peak_tflops={Precision.BF16: 2307.0, Precision.FP8: 4614.0},
        gke_accelerator="tpu7x",
        machine_type="tpu7x-standard-4t",
        machine_type_single_chip="tpu7x-standard-1t",
        other_machine_types=("tpu7x-ultranet-4t",),
        multi_host_needs_workload_policy=True,
        tpu_vm_runtime=None,
        topology=TopologyRule(
            dims=3,
            listed=("1x1x1", *_SMALL_3D),
            cube_max=144,
            number_form_defaults=_LARGE_3D_DEFAULTS,
        ),
    ),
    Family.V6E: Accelerator(
        family=Family.V6E,
        name="TPU v6e (Trillium)",
        xpk_prefix="v6e",
        xpk_number_counts_tensorcores=False,
        tensorcores_per_chip=1,
        jax_devices_per_chip=1,
        chips_per_host=4,
        hbm_gb_per_chip=32,
        usable_hbm_gib_per_device=31.24,
        peak_tflops={Precision.BF16: 918.0, Precision.FP8: 1836.0},
        gke_accelerator="tpu-v6e-slice",
        machine_type="ct6e-standard-4t",
        machine_type_single_chip="ct6e-standard-1t",
        other_machine_types=(),
        multi_host_needs_workload_policy=False,
        tpu_vm_runtime="v2-alpha-tpuv6e",
        topology=TopologyRule(
            dims=2, listed=("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
        ),
    ),
    Family.V5P: Accelerator(
        family=Family.V5P,
        name="TPU v5p",
        xpk_prefix="v5p",
        xpk_number_counts_tensorcores=True,
        tensorcores_per_chip=2,
        jax_devices_per_chip=1,
        chips_per_host=4,
        hbm_gb_per_chip=95,
        usable_hbm_gib_per_device=None,
        peak_tflops={Precision.BF16: 459.0, Precision.FP8: 918.0},
        gke_accelerator="tpu-v5p-slice",
        machine_type="ct5p-hightpu-4t",
        machine_type_single_chip=None,
        other_machine_types=(),
        multi_host_needs_workload_policy=False,
        tpu_vm_runtime="v2-alpha-tpuv5",
        topology=TopologyRule(
            dims=3, listed=_SMALL_3D, cube_max=140, number_form_defaults=_V5P_DEFAULTS
        ),
    ),
    Family.V5E: Accelerator(
        family=Family.V5E,
        name="TPU v5e",
        xpk_prefix="v5litepod",
        xpk_number_counts_tensorcores=False,
        tensorcores_per_chip=1,
        jax_devices_per_chip=1,
        chips_per_host=4,
        hbm_gb_per_chip=16,
        usable_hbm_gib_per_device=None,
        peak_tflops={Precision.BF16: 197.0, Precision.FP8: 394.0},
        gke_accelerator="tpu-v5-lite-podslice",
        machine_type="ct5lp-hightpu-4t",
        machine_type_single_chip=None,
        other_machine_types=(),
        multi_host_needs_workload_policy=False,
        tpu_vm_runtime="v2-alpha-tpuv5-lite",
        topology=TopologyRule(dims=2, listed=("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
    ),
    Family.V4: Accelerator(
        family=Family.V4,
        name="TPU v4",
        xpk_prefix="v4",
        xpk_number_counts_tensorcores=True,
        tensorcores_per_chip=2,
        jax_devices_per_chip=1,
        chips_per_host=4,
        hbm_gb_per_chip=32,
        usable_hbm_gib_per_device=None,
        peak_tflops={Precision.BF16: 275.0},
        gke_accelerator="tpu-v4-podslice",
        machine_type="ct4p-hightpu-4t",
        machine_type_single_chip=None,
        other_machine_types=(),
        multi_host_needs_workload_policy=False,
        tpu_vm_runtime="tpu-ubuntu2204-base",
        topology=TopologyRule(
            dims=3,
            listed=_SMALL_3D,
            cube_max=64,
            nondecreasing=False,
            number_form_defaults=_V4_DEFAULTS,
        ),
    ),
}

ACCELERATORS[Family.CPU] = Accelerator(
    family=Family.CPU,
    name="CPU (local)",
    xpk_prefix="cpu",
    xpk_number_counts_tensorcores=False,
    tensorcores_per_chip=1,
    jax_devices_per_chip=1,
    chips_per_host=1,
    hbm_gb_per_chip=0,
    usable_hbm_gib_per_device=None,
    peak_tflops={},
    gke_accelerator="",
    machine_type="",
    machine_type_single_chip=None,
    other_machine_types=(),
    multi_host_needs_workload_policy=False,
    tpu_vm_runtime=None,
    topology=TopologyRule(dims=1, listed=("1",)),
)

_PREFIX_ALIASES: dict[str, Family] = {
    "tpu7x": Family.V7,
    "v7": Family.V7,
    "v7x": Family.V7,
    "ironwood": Family.V7,
    "v6e": Family.V6E,
    "trillium": Family.V6E,
    "v5p": Family.V5P,
    "v5litepod": Family.V5E,
    "v5e": Family.V5E,
    "v4": Family.V4,
    "cpu": Family.CPU,
}


def family_from_prefix(prefix: str) -> Family | None:
    """The family an xpk prefix or a common alias names, or None."""
    return _PREFIX_ALIASES.get(prefix.lower())


def known_prefixes() -> tuple[str, ...]:
    """Every prefix :func:`family_from_prefix` accepts."""
    return tuple(_PREFIX_ALIASES)
