"""What one side (bash or the reader) says a recipe submits, and how two such views differ: for
``verify_recipes_with_bash``."""

from __future__ import annotations

from dataclasses import dataclass

Flag = tuple[str, str | None]
Entry = tuple[str, str | None, tuple[str, ...]]
"""One training program of the pod command: module (or script), base config, arguments."""


@dataclass(frozen=True)
class View:
    """What one side (bash or the reader) says the recipe submits."""

    device_type: str | None
    flags: frozenset[Flag]
    xla_flags: list[str]
    module: str | None
    base_config: str | None
    program_args: list[str]
    entries: tuple[Entry, ...] = ()
    """Every training program, in order: more than one when an ``if``/``else`` picks it."""


def _at(items: list[str], index: int) -> str:
    return repr(items[index]) if index < len(items) else "(missing)"


def list_difference(label: str, reader: list[str], bash: list[str]) -> str | None:
    if reader == bash:
        return None
    index = next(
        (i for i, (r, b) in enumerate(zip(reader, bash, strict=False)) if r != b),
        min(len(reader), len(bash)),
    )
    return (
        f"{label}[{index}] reader={_at(reader, index)} bash={_at(bash, index)}"
        f" ({len(reader)} vs {len(bash)} items)"
    )


def flag_difference(reader: frozenset[Flag], bash: frozenset[Flag]) -> str | None:
    if reader == bash:
        return None
    only_reader = sorted(reader - bash, key=str)
    only_bash = sorted(bash - reader, key=str)
    return f"xpk flags: reader only {only_reader}, bash only {only_bash}"


def differences(reader: View, bash: View) -> list[str]:
    found = [
        list_difference("xla_flags", reader.xla_flags, bash.xla_flags),
        list_difference("program_args", reader.program_args, bash.program_args),
        flag_difference(reader.flags, bash.flags),
        None
        if reader.entries == bash.entries
        else f"entries reader={list(reader.entries)!r} bash={list(bash.entries)!r}",
    ]
    for label, r, b in (
        ("device_type", reader.device_type, bash.device_type),
        ("module", reader.module, bash.module),
        ("base_config", reader.base_config, bash.base_config),
    ):
        if r != b:
            found.append(f"{label} reader={r!r} bash={b!r}")
    return [d for d in found if d is not None]
