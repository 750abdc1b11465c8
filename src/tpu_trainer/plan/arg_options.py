"""Options that change a plan's program arguments or how its checks judge them: ``--unset KEY``
(drop a recipe argument), ``--maxtext-version``, ``--skip-check NAME``."""

from __future__ import annotations

from dataclasses import dataclass

from tpu_trainer.errors import InputError
from tpu_trainer.recipes.shell_words import Word


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """How the pre-flight checks judge the plan."""

    maxtext_version: str | None = None
    """The MaxText version (release, branch, tag or commit) the image runs."""
    skip: tuple[str, ...] = ()
    """Checks not to run, by the names ``tpu-trainer check`` prints."""


def unset_words(
    words: list[Word], keys: tuple[str, ...], program: str
) -> tuple[list[Word], list[tuple[str, str]]]:
    """``words`` without the arguments ``keys`` name, and each dropped key with its value; a key
    the command does not have is an error naming the ones it has."""
    removed: list[tuple[str, str]] = []
    for key in keys:
        kept = [w for w in words if w.render().partition("=")[0] != key]
        if len(kept) == len(words):
            names = ", ".join(w.render().partition("=")[0] for w in words)
            raise InputError(
                f"--unset {key}: the {program} command has no argument {key}",
                fix=f"unset one of its arguments: {names}",
            )
        removed.append((key, next(w.render().partition("=")[2] for w in words if w not in kept)))
        words = kept
    return words, removed
