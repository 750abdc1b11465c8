"""What a run writes on this machine, checked before any capacity is asked for.

The submit and setup scripts go into the recipe folder, the report and its plots into the
model folder. A name the file system cannot hold, a folder that cannot be written, or XLA
flags the scripts cannot carry would otherwise stop a run only after its node pool exists.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tpu_trainer.plan.plan import Finding, Level, Plan

NAME_MAX = 255
_TEMP_SUFFIX = len(".") + len(".") + 8  # write_generated's ``.<name>.XXXXXXXX`` beside the file
_PLOT_SUFFIX = len("-01234567-tflops_chip.png")
_FLAG_UNSAFE = "'\"\\`$"

Writable = Callable[[Path], bool]


def is_writable(folder: Path) -> bool:
    """``folder`` is a folder this process may create files in."""
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def name_max(folder: Path) -> int:
    """The longest file name ``folder``'s file system holds (255 where it cannot say)."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return int(os.pathconf(probe, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX


def check_xla_flags(plan: Plan) -> list[Finding]:
    bad = [f for f in plan.xla_flags if any(c in f for c in _FLAG_UNSAFE)]
    if not bad:
        return []
    return [
        Finding(
            "xla-flags",
            Level.FAIL,
            f"XLA flag `{bad[0][:120]}` holds a quote, `\\` or `$`: the submit script cannot "
            "carry it into LIBTPU_INIT_ARGS unchanged",
            fix="write the flag's value literally, without quotes or `$`, in the recipe's XLA_FLAGS",
        )
    ]


def _names(plan: Plan) -> list[tuple[Path, str]]:
    """(folder, longest file name the run writes there)."""
    scripts = max((p.name for p in plan.files), key=len)
    return [
        (plan.output_folder, "." + scripts + "." + "x" * 8),
        (plan.model_dir, plan.model + "x" * _PLOT_SUFFIX),
    ]


def check_file_names(plan: Plan) -> list[Finding]:
    findings: list[Finding] = []
    for folder, name in _names(plan):
        limit = name_max(folder)
        size = len(name.encode("utf-8", "surrogateescape"))
        if size > limit:
            findings.append(
                Finding(
                    "file-names",
                    Level.FAIL,
                    f"the run writes files named after the model into {str(folder)[:120]}: "
                    f"{size} bytes, more than the file system's {limit}",
                    fix=f"rename the model folder to at most {limit - (size - len(plan.model))} "
                    "characters",
                )
            )
    return findings


def check_writable(plan: Plan, writable: Writable = is_writable) -> list[Finding]:
    findings: list[Finding] = []
    for folder, what in (
        (plan.output_folder, "the submit and setup scripts"),
        (plan.model_dir, "the model's README report and plots"),
    ):
        if not writable(folder):
            findings.append(
                Finding(
                    "writable-folders",
                    Level.FAIL,
                    f"{str(folder)[:160]} cannot be written: {what} go there",
                    fix=f"make it writable (`chmod u+w {str(folder)[:160]}`), or copy the "
                    "recipe folder somewhere you own and train from there",
                )
            )
    return findings


def check_local_files(plan: Plan, writable: Writable = is_writable) -> list[Finding]:
    """Every local-file finding of ``plan``; a pass when nothing is wrong."""
    findings = check_xla_flags(plan) + check_file_names(plan) + check_writable(plan, writable)
    if findings:
        return findings
    return [
        Finding(
            "local-files",
            Level.PASS,
            "the scripts, report and plots can be written; the XLA flags can be carried",
        )
    ]
