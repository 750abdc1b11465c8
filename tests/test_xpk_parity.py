"""The accelerator catalog agrees with xpk 1.16.0's own table of TPU device types.

Runs a small script with the python of the separate xpk virtual environment
(``$TPU_TRAINER_XPK_PYTHON``, else ``~/.cache/tpu-trainer/xpk-1.16.0/bin/python``),
with this checkout's ``src`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

SRC = Path(__file__).resolve().parents[1] / "src"

PARITY_SCRIPT = r"""
import json

from xpk.core.system_characteristics import UserFacingNameToSystemCharacteristics

from tpu_trainer.plan.slices import Slice

compared = 0
mismatches = []
for key, system in UserFacingNameToSystemCharacteristics.items():
    if system.accelerator_type.name != "TPU" or key.startswith("tpu7-"):
        continue
    compared += 1
    try:
        s = Slice.parse(key)
    except Exception as e:  # noqa: BLE001
        mismatches.append({"name": key, "field": "parse", "ours": repr(e), "xpk": "ok"})
        continue
    for field, ours, theirs in (
        ("topology", s.topology_name, system.topology),
        ("hosts", s.hosts, system.vms_per_slice),
        ("machine_type", s.machine_type, system.gce_machine_type),
        ("number_form", s.device_type_number, system.device_type),
        ("workload_policy", s.workload_policy is not None, system.requires_workload_policy),
    ):
        if ours != theirs:
            mismatches.append({"name": key, "field": field, "ours": ours, "xpk": theirs})
print(json.dumps({"compared": compared, "mismatches": mismatches}))
"""


def xpk_python() -> Path:
    configured = os.environ.get("TPU_TRAINER_XPK_PYTHON")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "tpu-trainer" / "xpk-1.16.0" / "bin" / "python"


@pytest.mark.xpk
def test_catalog_every_xpk_tpu_device_type_parses_to_same_slice() -> None:
    python = xpk_python()
    if not python.exists():
        pytest.fail(
            f"xpk 1.16.0's python is not at {python}; run `bash scripts/test.sh` "
            "(which installs it) or set $TPU_TRAINER_XPK_PYTHON"
        )
    env = {
        **os.environ,
        "TELEMETRY_ENABLED": "false",
        "PYTHONPATH": str(SRC),
    }
    result = subprocess.run(
        [str(python), "-c", PARITY_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"parity script failed:\n{result.stderr}"
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    mismatches = summary["mismatches"]
    assert mismatches == [], (
        f"{len(mismatches)} xpk device types disagree with the catalog, e.g. "
        f"{json.dumps(mismatches[:10], indent=1)}"
    )
    assert summary["compared"] > 1500
