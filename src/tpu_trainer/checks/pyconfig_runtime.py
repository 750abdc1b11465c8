"""MaxText's own ``pyconfig`` in the runtime: ``probes/pyconfig_probe.py`` runs
``pyconfig.initialize`` for one or more commands in one process, on CPU, and its verdicts become
findings next to the fast check's (``checks/pyconfig.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.checks.pyconfig import RENAMES, RUNTIME_NAME
from tpu_trainer.checks.pyconfig_names import flags
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.frameworks.maxtext.versions import KeyTable
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.runtime.manager import MAXTEXT, RuntimeSetupError, is_installed, runtime_python


@dataclass(frozen=True, slots=True, kw_only=True)
class PyconfigVerdict:
    """MaxText's answer for one command."""

    ok: bool
    error_type: str = ""
    """``ValueError`` (unknown key, model keys), ``ValidationError`` (types, names), ..."""
    message: str = ""
    """MaxText's message, without the list of every accepted name."""
    key: str = ""
    """The key MaxText names, when it names one."""
    seconds: float = 0.0
    derived: Mapping[str, Any] = field(default_factory=dict)
    """Values MaxText computed (num_target_devices, global_batch_size_to_train_on, ...)."""


def probe_spec(request: MaxTextRequest, ident: str) -> dict[str, Any]:
    """One configuration of the probe's payload (JSON: argv words, never a shell string)."""
    return {
        "id": ident,
        "base_config": request.base_config,
        "args": [f"{key}={value}" for key, value in request.args.items()],
        "compile_topology": request.slice.device_type_number,
        "devices": request.devices_per_slice,
        "num_slices": request.num_slices,
    }


def run_pyconfig(
    requests: Sequence[MaxTextRequest], runner: CommandRunner, python: Path | None = None
) -> list[PyconfigVerdict]:
    """MaxText's verdict on each command, from one probe process (MaxText is imported once)."""
    from tpu_trainer.runtime.probe import ProbeError, run_probe

    if python is None:
        if not is_installed(MAXTEXT):
            raise RuntimeSetupError(
                f"the MaxText {MAXTEXT.version} runtime is not installed",
                fix="run `tpu-trainer runtime install maxtext` (about 8 minutes, 2.8 GB)",
            )
        python = runtime_python(MAXTEXT)
    payload = {"configs": [probe_spec(r, str(i)) for i, r in enumerate(requests)]}
    answer = run_probe(
        runner, python, "pyconfig_probe", payload, timeout=180.0 + 30.0 * len(requests)
    )
    results = answer.get("results", [])
    if answer.get("error") or len(results) != len(requests):
        raise ProbeError(
            f"MaxText's pyconfig probe stopped: {answer.get('error') or 'answers missing'}",
            fix="reinstall the runtime (`tpu-trainer runtime install maxtext`) and run the check again",
        )
    return [
        PyconfigVerdict(
            ok=bool(r.get("ok")),
            error_type=str(r.get("error_type", "")),
            message=str(r.get("message", "")),
            key=str(r.get("key", "")),
            seconds=float(r.get("seconds", 0.0)),
            derived=dict(r.get("derived") or {}),
        )
        for r in results
    ]


def _one_line(message: str) -> str:
    """Pydantic's layout (header, then a location line and an indented error) on one line."""
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    if not lines or not re.fullmatch(r"\d+ validation errors? for \w+", lines[0]):
        return " ".join(line.strip() for line in lines)
    errors: list[str] = []
    where = ""
    for line in lines[1:]:
        if line.startswith(" "):
            errors.append(f"{where}: {line.strip()}" if where else line.strip())
            where = ""
        else:
            where = line.strip()
    return f"{lines[0]}: " + "; ".join(errors)


def verdict_findings(
    verdict: PyconfigVerdict, args: Mapping[str, str] | None = None
) -> list[Finding]:
    """A MaxText verdict as a finding whose fix names the next step."""
    if verdict.ok:
        shown = ", ".join(
            f"{k}={verdict.derived[k]}"
            for k in ("num_target_devices", "global_batch_size_to_train_on", "emb_dim")
            if k in verdict.derived
        )
        return [
            Finding(
                RUNTIME_NAME,
                Level.PASS,
                f"MaxText {MAXTEXT.version}'s pyconfig accepts the command"
                + (f" ({shown})" if shown else ""),
            )
        ]
    message = _one_line(verdict.message)
    if "override_model_config" in message:
        dropped = f"--unset {verdict.key}" if verdict.key else "drop the model keys"
        fix = f"add --set override_model_config=true, or {dropped}"
    elif verdict.key in RENAMES:
        value = (args or {}).get(verdict.key, "VALUE")
        new = RENAMES[verdict.key].targets
        fix = (
            f"rename {verdict.key} to {' or '.join(new)}: {flags([verdict.key], [(new[0], value)])}"
        )
    elif "not in MaxText's list" in message:
        fix = (
            f"--unset {verdict.key}, or use its MaxText {MAXTEXT.version} name "
            "(`tpu-trainer check --fast` gives the flags)"
        )
    else:
        fix = f"correct {verdict.key or 'the setting MaxText names'}, then run the check again"
    return [
        Finding(
            RUNTIME_NAME,
            Level.FAIL,
            f"MAXTEXT CONFIG ERROR ({verdict.error_type}): {message}",
            fix=fix,
        )
    ]


def for_version(
    findings: list[Finding], request: MaxTextRequest, judged: KeyTable
) -> list[Finding]:
    """The runtime's verdict for an image that runs ``judged``: a key the runtime's MaxText
    rejects but ``judged`` has is a version difference, not a failure of the run."""
    out: list[Finding] = []
    for found in findings:
        key = next((k for k in request.args if f"'{k}'" in found.message), "")
        if found.status is not Level.FAIL or not key or key not in judged.keys:
            out.append(found)
            continue
        out.append(
            Finding(
                found.name,
                Level.WARN,
                f"MaxText {MAXTEXT.version} (the runtime) rejects {key}, which MaxText "
                f"{judged.label} (your image) has: {found.message}",
                fix=f"nothing for an image running {judged.name}; for {MAXTEXT.version}: "
                + found.fix,
            )
        )
    return out


def check_runtime(
    request: MaxTextRequest, runner: CommandRunner, python: Path | None = None
) -> list[Finding]:
    """MaxText's own pyconfig on the command (seconds: MaxText's import dominates)."""
    try:
        verdict = run_pyconfig([request], runner, python)[0]
    except TpuTrainerError as e:
        return [
            Finding(
                RUNTIME_NAME,
                Level.WARN,
                f"MaxText's pyconfig could not be asked: {e.message}",
                e.fix,
            )
        ]
    return verdict_findings(verdict, request.args)
