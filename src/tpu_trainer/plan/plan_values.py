"""The small value types of a plan: findings (pass, warn, fail) and the submit script's variables."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    PASS = "pass"  # noqa: S105 (a status, not a password)
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class Finding:
    name: str
    status: Level
    message: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Variable:
    """An exported variable of the submit script."""

    name: str
    template: str
    """What the script assigns, references as ``${NAME}``."""
    value: str
    """Its value at submission, references expanded."""
    source: str
