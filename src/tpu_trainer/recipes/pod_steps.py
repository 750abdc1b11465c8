"""The pod command's steps as the recipe readers see them: which step is the training
program (``python3 -m <module>`` or ``python3 MaxText/train.py``), its entry point, framework
and XLA flags, and which steps set up, echo, tee or upload."""

from __future__ import annotations

import re

from tpu_trainer.recipes.recipe import CommandStep, EntryPoint, Framework, StepKind
from tpu_trainer.recipes.shell_words import (
    REF_CLOSE,
    REF_OPEN,
    Lit,
    Op,
    Quote,
    Redir,
    Ref,
    Token,
    Word,
)

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


_OPTION = re.compile(r"-[A-Za-z]+")


def _after_options(words: list[Word] | tuple[Word, ...], start: int) -> int:
    """Index of the first word from ``start`` on that is not an interpreter option (``-u``)."""
    i = start
    while i < len(words) and words[i].literal != "-m" and _OPTION.fullmatch(words[i].literal or ""):
        i += 1
    return i


_TRAIN_SCRIPT = re.compile(r"(?:.*/)?train(?:_[a-z0-9]+)?\.py")


def script_entry(words: list[Word] | tuple[Word, ...]) -> int | None:
    """Index of the program in ``python3 [-u] MaxText/train.py`` (older MaxText, no -m) or
    ``python src/maxdiffusion/train_sdxl.py``."""
    for i, word in enumerate(words[:-1]):
        if not is_python(word):
            continue
        at = _after_options(words, i + 1)
        program = words[at].literal or "" if at < len(words) else ""
        if _TRAIN_SCRIPT.fullmatch(program) and "/" in program and framework_of(program):
            return at
    return None


def is_redirect(word: Word) -> bool:
    return len(word.parts) == 1 and isinstance(word.parts[0], Redir)


def entry_point(words: tuple[Word, ...]) -> EntryPoint:
    """The training program of an entry step: what stands before the interpreter (shell
    keywords such as ``then``, ``NAME=value`` environment), its options, the module or script,
    the base config, the arguments, and redirections (``2>&1``) kept apart from them."""
    env: list[tuple[str, str]] = []
    lead: list[str] = []
    i = 0
    while i < len(words) and not is_python(words[i]):
        split = assignment(words[i])
        if split is not None:
            env.append((split[0], split[1].render()))
        else:
            lead.append(words[i].render())
        i += 1
    interpreter = words[i].render()
    script = None if any(w.literal == "-m" for w in words) else script_entry(words)
    end = (
        script
        if script is not None
        else next(k for k in range(i + 1, len(words)) if words[k].literal == "-m")
    )
    options = [w.render() for w in words[i + 1 : end] if _OPTION.fullmatch(w.literal or "")]
    i = end if script is not None else end + 1
    module = words[i].render()
    i += 1
    base = None
    if i < len(words) and re.search(r"\.ya?ml$", words[i].render()):
        base = words[i].render()
        i += 1
    rest = words[i:]
    return EntryPoint(
        tuple(env),
        interpreter,
        module,
        base,
        tuple(w for w in rest if not is_redirect(w)),
        tuple(options),
        tuple(lead),
        tuple(w.render() for w in rest if is_redirect(w)),
    )


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


_DUP = re.compile(r"\d*>&(?:\d+|-)")
_BASH = frozenset({"bash", "/bin/bash", "/usr/bin/bash"})
BRANCH_KEYWORDS = frozenset({"then", "else"})


def bash_c_script(tokens: list[Token]) -> Word | None:
    """The script of a pod command that is nothing but ``bash -c '<script>'`` (the word after
    ``-c``), else None. gcluster and xpk already run the command with ``bash -c``, so the inner
    script is the pod command itself."""
    words = [t for t in tokens if not (isinstance(t, Op) and t.text == "\n")]
    if len(words) != 3 or not all(isinstance(w, Word) for w in words):
        return None
    head, flag, script = (w for w in words if isinstance(w, Word))
    if head.literal not in _BASH or flag.literal != "-c":
        return None
    return script


def script_text(script: Word) -> str | None:
    """The inner script's text, submit-time references kept as sentinels; None when the word
    holds anything the outer shell would expand (``$NAME`` outside single quotes)."""
    out: list[str] = []
    for part in script.parts:
        if isinstance(part, Lit):
            out.append(part.text)
        elif isinstance(part, Ref):
            out.append(REF_OPEN + part.name + REF_CLOSE)
        else:
            return None
    return "".join(out)


def entry_alternatives(steps: tuple[CommandStep, ...]) -> str | None:
    """Why the entry steps are not one program or ``if``/``else`` branches running the same
    arguments (None when they are)."""
    entries = [s for s in steps if s.kind is StepKind.ENTRY]
    points = [entry_point(s.words) for s in entries]
    written = next((r for p in points for r in p.redirects if not _DUP.fullmatch(r)), None)
    if written is not None:
        return (
            f"the training program's output is redirected to a file (`{written}`): the tool "
            "follows the program through the pod's log"
        )
    if len(entries) < 2:
        return None
    if not all(p.lead and p.lead[0] in BRANCH_KEYWORDS for p in points):
        return f"{len(entries)} training programs outside the branches of one `if`"
    shown = {tuple(w.render() for w in p.args) for p in points}
    if len(shown) > 1:
        return "the branches of `if` run the training program with different arguments"
    return None
