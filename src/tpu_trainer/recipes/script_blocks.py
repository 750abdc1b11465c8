"""Blocks of a recipe script the reader skips without running them: ``if`` blocks (the
recipe's own checks: ``if ! command -v gcluster ...; then echo ...; exit 1; fi``) and the
``for NAME in ...; do <if blocks>; done`` loop that checks the recipe's variables."""

from __future__ import annotations

from collections.abc import Callable

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.shell_words import Op, Token, Word

Fail = Callable[..., RecipeError]
"""The reader's error maker: ``fail(message, line)`` names the file and shows the line."""


def skip_if_block(tokens: list[Token], start: int, fail: Fail) -> int:
    """The index after the ``fi`` closing the ``if`` at ``start`` (nested ones counted). The
    block is never run, so it may not hold the submission or the training program."""
    depth = 0
    at_command_start = True
    for j in range(start, len(tokens)):
        tok = tokens[j]
        if isinstance(tok, Op):
            at_command_start = tok.text in ("\n", ";", "&&", "||", "|")
            continue
        word = tok.literal
        if at_command_start and word in ("if", "fi", "then", "else", "!"):
            if word == "if":
                depth += 1
            elif word == "fi":
                depth -= 1
                if depth == 0:
                    return j + 1
            at_command_start = word != "fi"
            continue
        if at_command_start and word in ("xpk", "gcluster", "python", "python3"):
            raise fail(f"`{word}` inside an if block is not supported", tok.line)
        at_command_start = False
    first = tokens[start]
    raise fail("`if` without `fi`", first.line if isinstance(first, Word) else 0)


def skip_check_loop(tokens: list[Token], start: int, fail: Fail) -> int:
    """``for NAME in ...; do <if blocks>; done``: the recipe's own check of its variables
    (``[[ -z "${!NAME}" ]]``), skipped like an ``if`` block (the tool checks the values it
    fills in itself). Its body may hold only ``if`` blocks."""
    first = tokens[start]
    line = first.line
    j = start + 1
    while j < len(tokens) and not (isinstance(tokens[j], Word) and tokens[j].literal == "do"):  # type: ignore[union-attr]
        j += 1
    j += 1
    while j < len(tokens):
        tok = tokens[j]
        if isinstance(tok, Op) and tok.text in ("\n", ";"):
            j += 1
        elif isinstance(tok, Word) and tok.literal == "if":
            j = skip_if_block(tokens, j, fail)
        elif isinstance(tok, Word) and tok.literal == "done":
            return j + 1
        else:
            raise fail(
                "a `for` loop is read only when its body is `if` blocks checking the "
                "recipe's variables",
                tok.line,
            )
    raise fail("`for` without `done`", line)
