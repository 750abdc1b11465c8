"""Ask JAX to build logical meshes on real TPU topology devices (no TPU needed).

Input (argv[1], JSON): ``{"cases": [{"topology": "tpu7x:2x4x4", "chip_config": "default",
"chips_per_host_bounds": [2, 2, 1], "wrap": [false, false, false], "shapes": [[...], ...],
"allow_split_physical_axes": false}, ...]}``.
Output (last stdout line, JSON): ``{"ok": true, "jax": "...", "seconds": s, "cases": [{"topology":
..., "device_kind": ..., "devices": n, "physical_mesh": [...], "results": [{"shape": [...],
"ok": bool, "error": type, "message": text}, ...]}, ...]}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")


def _physical_shape(devices: list[Any]) -> list[int]:
    """The physical mesh JAX derives from the devices' coordinates (and cores, where split)."""
    try:
        from jax._src import mesh_utils as private  # type: ignore[import-not-found]

        return [int(n) for n in private._get_physical_tpu_mesh(devices).shape]
    except (ImportError, AttributeError):
        coords = [list(d.coords) for d in devices]
        dims = [max(c[i] for c in coords) - min(c[i] for c in coords) + 1 for i in range(3)]
        cores = len({d.core_on_chip for d in devices})
        return dims + ([cores] if cores > 1 else [])


def _one_case(case: dict[str, Any]) -> dict[str, Any]:
    from jax.experimental import mesh_utils  # type: ignore[import-not-found]
    from jax.experimental.topologies import get_topology_desc  # type: ignore[import-not-found]

    out: dict[str, Any] = {"topology": case["topology"]}
    try:
        devices = list(
            get_topology_desc(
                platform="tpu",
                topology_name=case["topology"],
                chip_config_name=case.get("chip_config", "default"),
                chips_per_host_bounds=tuple(case.get("chips_per_host_bounds", (2, 2, 1))),
                num_slices=1,
                wrap=tuple(case.get("wrap", (False, False, False))),
            ).devices
        )
    except Exception as e:
        out.update(error=type(e).__name__, message=str(e))
        return out
    out.update(
        device_kind=devices[-1].device_kind,
        devices=len(devices),
        physical_mesh=_physical_shape(devices),
    )
    results = []
    for shape in case.get("shapes", []):
        try:
            mesh = mesh_utils.create_device_mesh(
                shape,
                devices,
                allow_split_physical_axes=bool(case.get("allow_split_physical_axes", False)),
            )
            results.append({"shape": shape, "ok": True, "mesh_shape": list(mesh.shape)})
        except Exception as e:
            results.append(
                {"shape": shape, "ok": False, "error": type(e).__name__, "message": str(e)}
            )
    out["results"] = results
    return out


def main() -> None:
    started = time.perf_counter()
    payload = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    import jax  # type: ignore[import-not-found]

    cases = [_one_case(case) for case in payload.get("cases", [])]
    answer = {
        "ok": True,
        "jax": jax.__version__,
        "cases": cases,
        "seconds": round(time.perf_counter() - started, 3),
    }
    sys.stdout.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main()
