"""Running a probe (``runtime/probes/<name>.py``) in a runtime and reading its JSON answer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import CommandRunner

PROBES = Path(__file__).with_name("probes")


class ProbeError(TpuTrainerError):
    """A probe that did not answer with JSON."""


def probe_path(name: str) -> Path:
    path = PROBES / f"{name}.py"
    if not path.is_file():
        raise ProbeError(f"no probe named {name}", fix=f"expected {path}")
    return path


def run_probe(
    runner: CommandRunner,
    python: Path,
    name: str,
    payload: Mapping[str, Any],
    *,
    timeout: float = 600.0,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run probe ``name`` with ``python`` (argv, never a shell) and return its last JSON line."""
    result = runner.run(
        [str(python), str(probe_path(name)), json.dumps(dict(payload))],
        timeout=timeout,
        env={"PYTHONUNBUFFERED": "1", **(env or {})},
    )
    for raw in reversed(result.stdout.splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(answer, dict):
                return answer
    raise ProbeError(
        f"the {name} probe gave no answer (exit {result.code}): "
        f"{(result.stderr or result.stdout).strip()[-600:]}",
        fix="run it again with --debug; if it persists, reinstall the runtime "
        "(`tpu-trainer runtime remove maxtext-0.2.5 && tpu-trainer runtime install maxtext`)",
    )
