"""The pod command's steps as the recipe readers see them: which step is the training
program (``python3 -m <module>`` or ``python3 MaxText/train.py``), its entry point, framework
and XLA flags, and which steps set up, echo, tee or upload."""

from __future__ import annotations

import re

from tpu_trainer.recipes.recipe import CommandStep, EntryPoint, Framework, StepKind
from tpu_trainer.recipes.shell_words import Lit, Quote, Word

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_UPLOADERS = (("gsutil",), ("gcloud", "storage"))


def assignment(word: Word) -> tuple[str, Word] | None:
    """``NAME=value`` split into the name and the value's word; None for any other word."""
    first = word.parts[0] if word.parts else None
    if not isinstance(first, Lit) or first.quote is not Quote.NONE:
        return None
    m = _ASSIGN.match(first.text)
    if m is None:
        return None
    rest = first.text[m.end() :]
    parts = ((Lit(rest),) if rest else ()) + word.parts[1:]
    return m.group(1), Word(parts, word.line)


def is_python(word: Word) -> bool:
    text = word.literal or ""
    return re.fullmatch(r"(?:.*/)?python3?(?:\.\d+)?", text) is not None


def step_kind(words: list[Word], previous_separator: str) -> StepKind:
    head = words[0].literal or ""
    if any(is_python(w) for w in words[:4]) and (
        any(w.literal == "-m" for w in words) or script_entry(words) is not None
    ):
        return StepKind.ENTRY
    if head == "tee" and previous_separator == "|":
        return StepKind.TEE
    if head == "set":
        return StepKind.SHELL_OPTION
    if head == "export":
        return StepKind.EXPORT
    if head == "echo":
        return StepKind.ECHO
    lits = tuple(w.literal for w in words[:2])
    if any(lits[: len(u)] == u for u in _UPLOADERS) and any(w.literal == "cp" for w in words):
        return StepKind.UPLOAD
    return StepKind.SETUP


def script_entry(words: list[Word] | tuple[Word, ...]) -> int | None:
    """Index of ``MaxText/train.py`` in ``python3 MaxText/train.py`` (older MaxText, no -m)."""
    for i, word in enumerate(words[:-1]):
        program = words[i + 1].literal or ""
        if is_python(word) and program.endswith("/train.py") and framework_of(program):
            return i + 1
    return None


def entry_point(words: tuple[Word, ...]) -> EntryPoint:
    env: list[tuple[str, str]] = []
    i = 0
    while i < len(words) and not is_python(words[i]):
        split = assignment(words[i])
        if split is not None:
            env.append((split[0], split[1].render()))
        i += 1
    interpreter = words[i].render()
    script = None if any(w.literal == "-m" for w in words) else script_entry(words)
    i = i + 1 if script is None else script - 1  # the script stands where `-m <module>` would
    options: list[str] = []
    while script is None and i < len(words) and words[i].literal != "-m":
        if re.fullmatch(r"-[A-Za-z]+", words[i].literal or ""):
            options.append(words[i].render())
        i += 1
    module = words[i + 1].render()
    i += 2
    base = None
    if i < len(words) and re.search(r"\.ya?ml$", words[i].render()):
        base = words[i].render()
        i += 1
    return EntryPoint(tuple(env), interpreter, module, base, words[i:], tuple(options))


def framework_of(module: str) -> Framework | None:
    lowered = module.lower()
    if "maxdiffusion" in lowered:
        return Framework.MAXDIFFUSION
    if "maxtext" in lowered:
        return Framework.MAXTEXT
    return None


def xla_flags_of(steps: tuple[CommandStep, ...]) -> tuple[str, ...]:
    for step in steps:
        if step.kind not in (StepKind.EXPORT, StepKind.ENTRY):
            continue
        for word in step.words:
            split = assignment(word)
            if split is not None and split[0] == "LIBTPU_INIT_ARGS":
                return tuple(split[1].render().split())
    return ()
