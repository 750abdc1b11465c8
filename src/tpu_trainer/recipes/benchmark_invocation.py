"""Finding a MaxText benchmark-runner command in a recipe, and the MaxText revision it pins.

Trillium recipes are one-command scripts (``python3 -m benchmarks.benchmark_runner xpk
--model_name=... ...`` or the older ``python3 benchmarks/benchmark_runner.py ...``); v5p recipes
carry the same command in a fenced block of their README. Both are read with the recipe shell
reader, never run. The README beside the command says which MaxText to check out
(``git checkout <rev>``, or ``[maxtext](...)@<commit>`` under "Test Env").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.shell_words import (
    Lit,
    Ref,
    ShellSyntaxError,
    Var,
    Word,
    split_commands,
    tokenize,
)

RUNNER_MODULE = "benchmarks.benchmark_runner"
RUNNER_SCRIPT = "benchmarks/benchmark_runner.py"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
"""A README's fenced code block (its text in group 1)."""
_CHECKOUT = re.compile(r"git checkout\s+([A-Za-z0-9._/-]+)")
_TEST_ENV = re.compile(r"maxtext(?:\.git)?\)?@([0-9a-f]{7,40})", re.IGNORECASE)
_EXPORT = re.compile(r"^\s*export\s+([A-Za-z_][A-Za-z0-9_]*)=([^\s#]*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class OptionValue:
    text: str
    """The value as written, references as ``${NAME}``."""
    reference: str | None
    """The variable's name when the value is nothing but a reference (``$PROJECT``)."""
    line: int


@dataclass(frozen=True, slots=True)
class Invocation:
    """One benchmark-runner command: its subcommand and ``--option`` values, in order."""

    source: str
    line: int
    subcommand: str
    options: dict[str, OptionValue]


def mentions_runner(text: str) -> bool:
    return RUNNER_MODULE in text or RUNNER_SCRIPT in text


def _value(word: Word) -> OptionValue:
    parts = [p for p in word.parts if not (isinstance(p, Lit) and p.text == "")]
    ref = parts[0].name if len(parts) == 1 and isinstance(parts[0], Var | Ref) else None
    return OptionValue(word.render(), ref, word.line)


def _runner_start(words: list[Word]) -> int | None:
    """Index of the first word after the runner (module or script), or None."""
    for i, word in enumerate(words):
        lit = word.literal
        if lit == RUNNER_SCRIPT or (lit == RUNNER_MODULE and i and words[i - 1].literal == "-m"):
            return i + 1
    return None


def _options(words: list[Word], source: str) -> tuple[str, dict[str, OptionValue]]:
    subcommand = ""
    if words and words[0].literal and not words[0].literal.startswith("-"):
        subcommand = words[0].literal
        words = words[1:]
    options: dict[str, OptionValue] = {}
    i = 0
    while i < len(words):
        word = words[i]
        head = word.parts[0] if word.parts else None
        if not (isinstance(head, Lit) and head.text.startswith("--")):
            raise RecipeError(
                f"{source}:{word.line}: unexpected benchmark_runner argument `{word.render()}`",
                fix="write each runner option as --name=value",
            )
        name, eq, rest = head.text.partition("=")
        if eq:
            value = _value(Word((Lit(rest), *word.parts[1:]), word.line))
        elif len(word.parts) == 1 and i + 1 < len(words) and not _is_option(words[i + 1]):
            i += 1
            value = _value(words[i])
        else:
            value = OptionValue("", None, word.line)
        options[name.removeprefix("--")] = value
        i += 1
    return subcommand, options


def _is_option(word: Word) -> bool:
    head = word.parts[0] if word.parts else None
    return isinstance(head, Lit) and head.text.startswith("--")


def _in_text(text: str, source: str, first_line: int) -> Invocation | None:
    try:
        commands = split_commands(
            tokenize(text, first_line), frozenset({"\n", ";", "&&", "||", "|"})
        )
    except ShellSyntaxError as e:
        raise RecipeError(
            f"{source}:{e.line}: {e}", fix="write the benchmark_runner command as plain words"
        ) from None
    for words, _ in commands:
        start = _runner_start(words)
        if start is not None:
            subcommand, options = _options(words[start:], source)
            return Invocation(source, words[0].line, subcommand, options)
    return None


def find_invocation(text: str, source: str, *, markdown: bool) -> Invocation:
    """The first benchmark-runner command of a script, or of a README's fenced blocks."""
    blocks = (
        [(m.group(1), text.count("\n", 0, m.start(1)) + 1) for m in FENCE.finditer(text)]
        if markdown
        else [(text, 1)]
    )
    for block, line in blocks:
        if mentions_runner(block):
            found = _in_text(block, source, line)
            if found is not None:
                return found
    raise RecipeError(
        f"{source}: no `python3 -m {RUNNER_MODULE}` command found",
        fix="is this a tpu-recipes recipe? The tool reads run_recipe.sh scripts and "
        "benchmark_runner commands (scripts, or a README's fenced block)",
    )


def pinned_revision(readme: str) -> str | None:
    """The MaxText revision a recipe README says to check out."""
    for pattern in (_CHECKOUT, _TEST_ENV):
        found = pattern.search(readme)
        if found is not None:
            return found.group(1)
    return None


def readme_exports(readme: str) -> dict[str, str]:
    """``export NAME=value`` lines of a README's fenced blocks whose value is plain text."""
    out: dict[str, str] = {}
    for block in FENCE.finditer(readme):
        for name, value in _EXPORT.findall(block.group(1)):
            if value and "$" not in value:
                out[name] = value
    return out


def readme_device_type(readme: str) -> str | None:
    """The slice a README's title names (``... on TPU v5p-1024``)."""
    title = next((ln for ln in readme.splitlines() if ln.startswith("#")), "")
    found = re.search(r"\b(v5p|v6e|v5litepod|v4|tpu7x)-(\d+)\b", title)
    return found.group(0) if found else None
