"""gcloud's command line: global flags, the command tree, and per-command parsers.

gcloud takes global flags (``--project``, ``--format``, ``--quiet``...) anywhere, then a
command path (``[alpha|beta] container node-pools create``), then the command's own flags and
positionals in any order. It never accepts abbreviated flags.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NoReturn

from tpu_trainer.fakecloud.common import Handler, StrictParser, ToolExit
from tpu_trainer.fakecloud.gke_text import invalid_choice

_GLOBAL_VALUE = (
    "--project",
    "--format",
    "--verbosity",
    "--account",
    "--configuration",
    "--impersonate-service-account",
    "--billing-project",
    "--trace-token",
    "--access-token-file",
    "--flags-file",
    "--flatten",
    "--sort-by",
    "--page-size",
    "--limit",
)
_GLOBAL_BOOL = (
    "--quiet",
    "-q",
    "--log-http",
    "--uri",
    "--user-output-enabled",
    "--no-user-output-enabled",
)
TRACKS = ("alpha", "beta")


@dataclass(frozen=True, slots=True)
class Ctx:
    """What every gcloud command knows before its own flags are parsed."""

    command: str
    """gcloud's name for the command, as its errors show it: ``gcloud.beta.container.node-pools.create``."""
    track: str
    """``""`` (GA), ``alpha`` or ``beta``."""
    project: str | None
    fmt: str | None
    quiet: bool

    def fail(self, message: str, code: int = 1) -> ToolExit:
        return ToolExit(f"ERROR: ({self.command}) {message}\n", code)

    def parser(self) -> StrictParser:
        """A parser whose errors read like gcloud's (exit 2)."""
        parser: StrictParser

        def on_error(message: str) -> NoReturn:
            raise ToolExit(_gcloud_usage_error(self.command, message, parser), 2)

        parser = StrictParser(on_error, prog="gcloud")
        return parser


def _gcloud_usage_error(command: str, message: str, parser: argparse.ArgumentParser) -> str:
    """argparse's complaint in gcloud's words."""
    if message.startswith("the following arguments are required: "):
        missing = message.split(": ", 1)[1].split(", ", 1)[0]
        message = f"argument {missing}: Must be specified."
    elif " not allowed with argument " in message and (
        "--region" in message or "--zone" in message
    ):
        message = (
            "argument --location: At most one of --location | --region | --zone can be specified."
        )
    elif message.startswith("unrecognized arguments: "):
        first = message.split(": ", 1)[1].split(maxsplit=1)[0].split("=", 1)[0]
        known = [o for o in parser._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(first, known, n=1)
        message += f" (did you mean '{close[0]}'?) " if close else " "
    return (
        f"ERROR: ({command}) {message}\n\nTo search the help text of gcloud commands, run:\n"
        "  gcloud help -- SEARCH_TERMS\n"
    )


Leaf = Callable[[Ctx, list[str]], Handler]
Tree = Mapping[str, "Tree | Leaf"]


def split_globals(argv: list[str]) -> tuple[dict[str, str | bool], list[str]]:
    """Global flags (``--project=P`` or ``--project P``) apart from the rest."""
    found: dict[str, str | bool] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _GLOBAL_VALUE:
            if not eq:
                if i + 1 >= len(argv):
                    raise ToolExit(f"ERROR: (gcloud) argument {name}: expected one argument\n", 2)
                i += 1
                value = argv[i]
            found[name.lstrip("-")] = value
        elif arg in _GLOBAL_BOOL:
            found["quiet" if arg in ("-q", "--quiet") else arg.lstrip("-")] = True
        else:
            rest.append(arg)
        i += 1
    return found, rest


def resolve(tree: Tree, argv: list[str]) -> Handler:
    """Walk the command path of ``argv`` through ``tree`` and build the leaf's handler."""
    flags, rest = split_globals(argv)
    track = rest[0] if rest and rest[0] in TRACKS else ""
    words = rest[1:] if track else rest
    path = ["gcloud", *([track] if track else [])]
    node: Tree | Leaf = tree
    while isinstance(node, Mapping):
        group = ".".join(path)
        if not words or words[0].startswith("-"):
            raise ToolExit(f"ERROR: ({group}) Command name argument expected.\n", 2)
        word = words.pop(0)
        if word not in node:
            raise ToolExit(invalid_choice(group, word, list(node)), 2)
        node = node[word]
        path.append(word)
    project = flags.get("project")
    fmt = flags.get("format")
    ctx = Ctx(
        ".".join(path),
        track,
        project if isinstance(project, str) else None,
        fmt if isinstance(fmt, str) else None,
        bool(flags.get("quiet")),
    )
    return node(ctx, words)
