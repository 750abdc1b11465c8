"""The command-line surface is frozen: every command and option, as the help shows them.

A command or option that appears, disappears or changes its flags, type or default changes what
users and scripts can type; it fails here until the golden file is rewritten on purpose with
``pytest tests/test_cli_surface.py --update-golden`` and the change reviewed in the diff.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from conftest import GOLDEN, check_golden
from tpu_trainer.cli.main import app

pytestmark = pytest.mark.unit

SURFACE = GOLDEN / "cli_surface.txt"
# The bracketed notes the help prints after an option's text: default, range, required.
_NOTES = re.compile(r"\s*(\[[^\[\]]*\])\s*$")


def _default(value: object) -> str:
    if isinstance(value, enum.Enum):
        return repr(value.value)
    if isinstance(value, Path):
        return repr(str(value))
    if isinstance(value, list | tuple):
        return repr([_default(v) for v in value])
    return repr(value)


def _commands(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    yield path, command
    for name in sorted(getattr(command, "commands", {}) or {}):
        yield from _commands(command.commands[name], f"{path} {name}")


def _param_line(path: str, param: Any, ctx: Any) -> str:
    record = param.get_help_record(ctx)
    shown, text = (record[0], record[1]) if record else (" ".join(param.opts), "")
    notes = _NOTES.search(text or "")
    fields = [
        param.param_type_name,
        shown,
        f"default={_default(param.default)}",
    ]
    if param.required:
        fields.append("required")
    if param.multiple:
        fields.append("multiple")
    if getattr(param, "hidden", False):
        fields.append("hidden")
    if notes:
        fields.append(notes.group(1))
    return f"{path}  " + "  ".join(fields)


def surface() -> str:
    """Every command of the app with its kind, then each of its parameters, one per line and
    each line naming its command."""
    root = typer.main.get_command(app)
    lines: list[str] = []
    for path, command in _commands(root, "tpu-trainer"):
        ctx = command.make_context(path, [], resilient_parsing=True)
        kind = "group" if hasattr(command, "commands") else "command"
        lines.append(f"{path}  ({kind}{', hidden' if command.hidden else ''})")
        lines.extend(_param_line(path, param, ctx) for param in command.params)
    return "\n".join(lines) + "\n"


def test_the_cli_surface_matches_its_golden_file(update_golden: bool) -> None:
    text = surface()
    if SURFACE.exists() and not update_golden:
        now, golden = text.splitlines(), SURFACE.read_text(encoding="utf-8").splitlines()
        changed = [f"- {line}" for line in golden if line not in now]
        changed += [f"+ {line}" for line in now if line not in golden]
        assert not changed, (
            "the command-line surface changed (- golden, + now):\n"
            + "\n".join(changed)
            + "\nIf the change is intended, rewrite the golden file deliberately with "
            "`pytest tests/test_cli_surface.py --update-golden` and review "
            "tests/golden/cli_surface.txt in the diff."
        )
    check_golden(SURFACE, text, update_golden)


def test_every_command_has_a_line_in_the_surface() -> None:
    text = surface()
    root = typer.main.get_command(app)
    for path, _ in _commands(root, "tpu-trainer"):
        assert f"{path}  (" in text
