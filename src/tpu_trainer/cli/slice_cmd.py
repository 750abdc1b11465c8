"""``tpu-trainer slice``: what a device type means."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tpu_trainer.cli.common import JsonOpt


def slice_info(
    device_type: Annotated[str, typer.Argument(help="e.g. tpu7x-4x4x8, tpu7x-64, v6e-16.")],
    num_slices: Annotated[int, typer.Option("--num-slices", min=1)] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Chips, JAX devices, hosts and the names GKE, Kueue and xpk use for a TPU slice."""
    from tpu_trainer.catalog.accelerators import Precision
    from tpu_trainer.plan.slices import Slice

    s = Slice.parse(device_type)
    key, value = s.configmap_entry(num_slices)
    rows: dict[str, object] = {
        "accelerator": s.accelerator.name,
        "device_type": s.device_type,
        "device_type_number": s.device_type_number,
        "topology": s.topology_name,
        "chips": s.chips,
        "tensorcores": s.tensorcores,
        "jax_devices": s.jax_devices,
        "hosts": s.hosts,
        "chips_per_host": s.chips_per_host,
        "hbm_gb_per_chip": s.hbm_gb_per_chip,
        "peak_tflops_bf16_per_chip": s.peak_tflops_per_chip(Precision.BF16),
        "peak_tflops_fp8_per_chip": s.peak_tflops_per_chip(Precision.FP8),
        "gke_accelerator": s.accelerator.gke_accelerator,
        "machine_type": s.machine_type,
        "kueue_flavor": s.kueue_flavor(num_slices),
        "kueue_quota": s.kueue_quota(num_slices),
        "configmap_entry": f'{key}: "{value}"',
        "workload_policy": s.workload_policy,
        "tpu_vm_runtime": s.accelerator.tpu_vm_runtime,
        "also_means": list(s.alternatives),
    }
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{device_type}", show_header=False)
    for k, v in rows.items():
        table.add_row(k, "-" if v in (None, []) else str(v))
    Console().print(table)
