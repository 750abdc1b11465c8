"""A README whose fenced block submits a training script with xpk (tpu-recipes' v5p GPT3-175B,
Llama2-7B, Mixtral-8x7B, SDXL and Stable Diffusion 2 recipes).

Such a README sets variables in fenced blocks (``export TPU_TYPE=v5p-512``, ``OUTPUT_PATH=...``)
and then runs ``xpk workload create ... --command "bash <script> RUN_NAME=$RUN_NAME ..."``
(also as ``python3 xpk.py workload create`` or ``python3 ../xpk.py workload create``). A README
may offer one block of settings per slice size (GPT3-175B: ``export TPU_TYPE=v5p-1024`` with
``export SCRIPT=...``), of which the user runs one. This module finds the command and the
assignments, and expands them as the submitting shell would: the flags xpk gets and the
``--command`` the pod's shell runs. Nothing is run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.benchmark_invocation import FENCE
from tpu_trainer.recipes.script_words import ExpansionError, Scope, expand_fields, expand_text
from tpu_trainer.recipes.shell_words import (
    Lit,
    Quote,
    ShellSyntaxError,
    Word,
    split_commands,
    tokenize,
)

SIZE_VARIABLE = "TPU_TYPE"
"""The variable each per-size block of settings sets."""
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_SEPARATORS = frozenset({"\n", ";", "&&", "||", "|"})
_XPK_SCRIPT = re.compile(r"(?:.*/)?xpk\.py")
_BASH_COMMAND = re.compile(r"--command[= ]+[\"']?\s*\\?\s*(?:bash|sh)\s")


@dataclass(frozen=True, slots=True)
class Assignment:
    name: str
    value: Word
    line: int


@dataclass(frozen=True, slots=True)
class Block:
    """The assignments of one fenced block, in order."""

    line: int
    assignments: tuple[Assignment, ...]

    def size(self) -> str | None:
        """The literal ``TPU_TYPE`` this block sets, if any."""
        found = [a.value.literal for a in self.assignments if a.name == SIZE_VARIABLE]
        return found[-1] if found else None


@dataclass(frozen=True, slots=True)
class ScriptReadme:
    source: str
    line: int
    """Where ``xpk workload create`` starts."""
    launcher: str
    """How the README runs xpk: ``xpk``, ``python3 xpk.py`` or ``python3 ../xpk.py``."""
    words: tuple[Word, ...]
    """The words after ``workload create``."""
    blocks: tuple[Block, ...]
    """Fenced blocks up to and including the command's, with their assignments."""

    def sizes(self) -> list[str]:
        """The TPU types of the README's per-size blocks (empty when it has one or none)."""
        sizes = [s for b in self.blocks if (s := b.size())]
        return sizes if len(sizes) > 1 else []


@dataclass(frozen=True, slots=True)
class Submission:
    """What the submitting shell hands xpk, and what it took to get there."""

    argv: tuple[str, ...]
    """The words after ``workload create``, as xpk receives them."""
    lines: Mapping[str, int]
    """The README line each variable the submission used was last set on."""
    size: str | None
    """The per-size block taken (its TPU type), when the README has several."""


def _assignments(words: list[Word]) -> list[tuple[str, Word]] | None:
    """``export A=1 B=2`` or ``A=1``: name and value word of each; None for other commands."""
    exported = words[0].literal == "export"
    out: list[tuple[str, Word]] = []
    for word in words[1:] if exported else words:
        first = word.parts[0] if word.parts else None
        plain = isinstance(first, Lit) and first.quote is Quote.NONE
        m = _ASSIGN.match(first.text) if plain and isinstance(first, Lit) else None
        if m is None:
            if exported:
                continue  # `export NAME`
            return None
        rest = first.text[m.end() :] if isinstance(first, Lit) else ""
        value = Word(((Lit(rest),) if rest else ()) + word.parts[1:], word.line)
        out.append((m.group(1), value))
    return out


def _submit_words(words: list[Word]) -> tuple[str, list[Word]] | None:
    lits = [w.literal or "" for w in words[:4]]
    if lits[:3] == ["xpk", "workload", "create"]:
        return "xpk", words[3:]
    lits += [""] * (4 - len(lits))
    python = lits[0] in ("python3", "python") and _XPK_SCRIPT.fullmatch(lits[1]) is not None
    if python and lits[2:4] == ["workload", "create"]:
        return f"{lits[0]} {lits[1]}", words[4:]
    return None


def _command_of(words: list[Word]) -> Word | None:
    for i, word in enumerate(words):
        if word.literal == "--command" and i + 1 < len(words):
            return words[i + 1]
        first = word.parts[0] if word.parts else None
        if isinstance(first, Lit) and first.text.startswith("--command="):
            return word
    return None


def runs_script(command: Word | None) -> bool:
    """Whether a ``--command`` value starts with ``bash <script>`` (or ``sh``)."""
    if command is None:
        return False
    text = "".join(getattr(p, "text", "$") for p in command.parts).removeprefix("--command=")
    return re.match(r"\s*(?:bash|sh)\s+\S", text) is not None


def find_script_readme(text: str, source: str) -> ScriptReadme | None:
    """The first fenced block submitting ``--command "bash <script> ..."`` with xpk, and the
    blocks before it; None when the README has none."""
    blocks: list[Block] = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start(1)) + 1
        try:
            commands = split_commands(tokenize(m.group(1), line, expansions=True), _SEPARATORS)
        except ShellSyntaxError:
            continue  # prose-like blocks (YAML, logs) are not shell
        found: list[Assignment] = []
        for words, _ in commands:
            pairs = _assignments(words)
            if pairs is not None:
                found += [Assignment(n, v, words[0].line) for n, v in pairs]
                continue
            submit = _submit_words(words)
            if submit is not None and runs_script(_command_of(submit[1])):
                blocks.append(Block(line, tuple(found)))
                return ScriptReadme(
                    source, words[0].line, submit[0], tuple(submit[1]), tuple(blocks)
                )
        blocks.append(Block(line, tuple(found)))
    return None


def mentions_script_command(text: str) -> bool:
    """A cheap test before :func:`find_script_readme`: ``workload create`` and ``--command``
    running ``bash``."""
    return "workload create" in text and _BASH_COMMAND.search(text) is not None


def submission(
    readme: ScriptReadme,
    scope: Scope,
    fixed: Mapping[str, str],
    size: str | None = None,
) -> Submission:
    """Expand the README's assignments and xpk command in ``scope`` (the submitting shell's
    variables). ``fixed`` values win over the README's own (the tool's values, ``--var``);
    ``size`` picks a per-size block by its TPU type (default: the first)."""
    sizes = readme.sizes()
    if size is not None and sizes and size not in sizes:
        raise RecipeError(
            f"{readme.source}: no block of settings for {SIZE_VARIABLE}={size}",
            fix=f"pass --var {SIZE_VARIABLE}= one of {', '.join(sizes)}",
        )
    chosen = (size or sizes[0]) if sizes else None
    lines: dict[str, int] = {}
    scope.values.update(fixed)
    try:
        for block in readme.blocks:
            if sizes and block.size() not in (None, chosen):
                continue
            for a in block.assignments:
                if a.name not in fixed:
                    scope.values[a.name] = expand_text(a.value, scope)
                    lines[a.name] = a.line
        argv = [f for w in readme.words for f in expand_fields(w, scope)]
    except ExpansionError as e:
        raise RecipeError(f"{readme.source}:{e.line}: {e}", fix="") from None
    return Submission(tuple(argv), lines, chosen)


def flag_pairs(argv: tuple[str, ...] | list[str]) -> list[tuple[str, str | None]]:
    """``--name=value``, ``--name value`` and ``--switch`` as xpk's parser pairs them; a stray
    word is kept as ``(word, None)``."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if not word.startswith("--"):
            pairs.append((word, None))
        elif eq:
            pairs.append((name, value))
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            pairs.append((name, argv[i + 1]))
            i += 1
        else:
            pairs.append((name, None))
        i += 1
    return pairs
