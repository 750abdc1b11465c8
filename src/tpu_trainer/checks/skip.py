"""``--skip-check NAME``: leave named checks out of a report, by the names ``tpu-trainer check``
prints. A name covers the findings it names and those it begins (``mesh`` covers ``mesh-ici``
and ``mesh (AOT)``; ``maxtext-config`` every MaxText-configuration finding); a name that covers
nothing the checks can print is an error listing the names there are."""

from __future__ import annotations

from collections.abc import Sequence

from tpu_trainer.errors import InputError
from tpu_trainer.plan.plan import Finding, Level

CHECK_NAMES = (
    "recipe",
    "maxtext-config",
    "maxtext-config version",
    "maxtext-config keys",
    "maxtext-config derived keys",
    "maxtext-config types",
    "maxtext-config model",
    "maxtext-config model keys",
    "maxtext-config (MaxText pyconfig)",
    "mesh",
    "mesh-mapping (JAX)",
    "sharding",
    "memory-fit",
    "memory-fit (estimate)",
    "memory-fit (AOT)",
    "data-sufficiency",
    "resumability",
)
"""The names every MaxText plan's checks can print (a report's own names are valid too)."""


def covers(name: str, finding: str) -> bool:
    return finding == name or finding.startswith((f"{name} ", f"{name}-"))


def skips(names: Sequence[str], check: str) -> bool:
    """Whether ``--skip-check`` leaves out the whole group of checks named ``check``."""
    return any(covers(n, check) for n in names)


def skip_findings(findings: Sequence[Finding], names: Sequence[str]) -> tuple[Finding, ...]:
    """``findings`` without those ``names`` cover, and one warning saying what was left out."""
    if not names:
        return tuple(findings)
    printed = [f.name for f in findings]
    valid = sorted(set(CHECK_NAMES) | set(printed))
    unknown = [n for n in names if not any(covers(n, v) for v in valid)]
    if unknown:
        raise InputError(
            f"--skip-check {unknown[0]}: no check has that name",
            fix="use one of: " + ", ".join(valid),
        )
    kept = tuple(f for f in findings if not any(covers(n, f.name) for n in names))
    left = len(findings) - len(kept)
    note = Finding(
        "skipped checks",
        Level.WARN,
        f"not judged (--skip-check): {', '.join(names)} ({left} finding(s) left out)",
        fix="drop --skip-check to judge them again",
    )
    return (*kept, note)
