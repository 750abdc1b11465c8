"""What a training script makes the pod do, worked out from its text (never run).

Recipes such as tpu-recipes' v5p READMEs submit ``--command "bash <script> RUN_NAME=...
OUTPUT_PATH=..."``: the pod's shell runs a script (from the image's MaxText, or the recipe's own
``scripts/``) that sets variables, reads its ``KEY=VALUE`` arguments, may run another script,
and ends in the training program. :func:`evaluate` follows that as bash would — assignments and
exports, ``${1:-default}`` arguments, the ``for ARG in "$@"; do IFS='=' read -r KEY VALUE <<<
"$ARG"; export "$KEY"="$VALUE"; done`` loop, ``if``/``elif``/``else`` on string tests, ``set
-e``/``-u``, ``bash other.sh ...`` and ``./other.sh ...`` into scripts it has the text of — and
returns the pod's steps in order: exports, setup commands (``bash preflight.sh``, ``git clone``,
``cd``, ``pip install``), and the training program.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.pod_steps import is_python
from tpu_trainer.recipes.recipe import StepKind
from tpu_trainer.recipes.script_parse import ForLoop, IfBlock, Node, Simple, parse_script
from tpu_trainer.recipes.script_words import (
    ExpansionError,
    Scope,
    expand_fields,
    expand_text,
    read_fields,
    test_condition,
)
from tpu_trainer.recipes.shell_words import (
    Lit,
    Quote,
    Word,
)

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHELLS = frozenset({"bash", "sh", "/bin/bash", "/bin/sh"})
_TESTS = {"[": "]", "[[": "]]", "test": ""}
_MAX_DEPTH = 8


class ScriptFiles(Protocol):
    """The files a script may reach in the pod: scripts whose text is known, and whether a path
    exists (None: not known)."""

    def script(self, path: str) -> tuple[str, str] | None:
        """The text of the script at ``path`` (relative to the pod's working directory) and
        where it was found, or None."""

    def exists(self, path: str) -> bool | None: ...


class MissingScriptError(RecipeError):
    """The script a command runs is not at the revision being read."""

    def __init__(self, path: str, where: str) -> None:
        super().__init__(f"{where}: {path} does not exist there", fix="")
        self.path = path


@dataclass(frozen=True, slots=True)
class PodStep:
    kind: StepKind
    """EXPORT (``words`` is name and value), SETUP or ENTRY."""
    words: tuple[str, ...]
    where: str
    """``script:line``."""
    cwd: str = ""
    """The directory the step runs in, relative to where the pod's command starts."""


@dataclass(frozen=True, slots=True)
class ScriptRun:
    steps: tuple[PodStep, ...]
    scripts: tuple[tuple[str, str], ...]
    """Every script followed, as invoked, with where its text came from."""
    checkouts: tuple[tuple[str, str], ...]
    """``(directory, revision)`` of each ``git checkout`` after ``cd``: the revision the pod
    runs from that clone."""


class _Evaluator:
    def __init__(self, files: ScriptFiles) -> None:
        self.files = files
        self.steps: list[PodStep] = []
        self.scripts: list[tuple[str, str]] = []
        self.checkouts: list[tuple[str, str]] = []
        self.cwd = ""
        self.errexit = False
        self.stopped = False

    def run(self, nodes: tuple[Node, ...], scope: Scope, where: str) -> None:
        for node in nodes:
            if self.stopped:
                return
            try:
                self.node(node, scope, where)
            except ExpansionError as e:
                line = e.line or (node.line if isinstance(node, Simple | ForLoop) else 0)
                raise RecipeError(f"{where}:{line}: {e}", fix="") from None

    def node(self, node: Node, scope: Scope, where: str) -> None:
        if isinstance(node, Simple):
            self.simple(node, scope, where)
        elif isinstance(node, IfBlock):
            for cond, body in node.branches:
                if self.test(cond, scope, where):
                    self.run(body, scope, where)
                    return
            self.run(node.otherwise, scope, where)
        else:
            for item in [f for w in node.items for f in expand_fields(w, scope)]:
                scope.values[node.name] = item
                self.run(node.body, scope, where)

    def test(self, cond: tuple[Simple, ...], scope: Scope, where: str) -> bool:
        if len(cond) != 1:
            raise RecipeError(f"{where}: an `if` with more than one test command", fix="")
        fields = [f for w in cond[0].words for f in expand_fields(w, scope)]
        negate = bool(fields) and fields[0] == "!"
        fields = fields[1:] if negate else fields
        close = _TESTS.get(fields[0] if fields else "")
        if close is None or (close and fields[-1] != close):
            shown = " ".join(fields)
            raise ExpansionError(f"`if {shown}` is read only with a [ ... ] test", cond[0].line)
        inner = fields[1:-1] if close else fields[1:]
        return test_condition(inner, _Exists(self.files), cond[0].line) != negate

    def simple(self, node: Simple, scope: Scope, where: str) -> None:
        words = list(node.words)
        prefix: list[tuple[str, str, Word]] = []
        while words and (m := _assignment(words[0])) is not None:
            prefix.append((m.group(1), m.group(2), words.pop(0)))
        if not words:
            for name, append, word in prefix:
                self.assign(name, append, word, scope)
                if name in scope.exported:  # the environment holds the new value
                    step = (name, scope.values[name])
                    self.steps.append(PodStep(StepKind.EXPORT, step, f"{where}:{node.line}"))
            return
        at = f"{where}:{node.line}"
        env = [(n, expand_text(_value_word(w), scope)) for n, _, w in prefix]
        if words[0].literal == "read":
            self.read(words, node, dict(env), scope)
            return
        if words[0].literal == "export":
            self.export(words[1:], scope, at)
            return
        fields = [f for w in words for f in expand_fields(w, scope)]
        if fields:
            self.command(fields, env, scope, at)

    def assign(self, name: str, append: str, word: Word, scope: Scope) -> None:
        value = expand_text(_value_word(word), scope)
        scope.values[name] = (scope.values.get(name, "") + value) if append else value

    def read(self, words: list[Word], node: Simple, env: dict[str, str], scope: Scope) -> None:
        names = [w.literal or "" for w in words[1:] if w.literal != "-r"]
        if node.here is None or not all(_IDENTIFIER.fullmatch(n) for n in names) or not names:
            raise ExpansionError("`read` is read only as `read -r NAME... <<< WORD`", node.line)
        got = read_fields(expand_text(node.here, scope), names, env.get("IFS", " \t\n"))
        scope.values.update(got)

    def command(self, fields: list[str], env: list[tuple[str, str]], scope: Scope, at: str) -> None:
        head = fields[0]
        if head == "set":
            self.options(fields[1:], scope)
        elif head in ("echo", ":", "true"):
            return
        elif head == "exit":
            if fields[1:2] not in ([], ["0"]):
                raise RecipeError(f"{at}: the script exits with {fields[1]} here", fix="")
            self.stopped = True
        elif head == "shift":
            scope.args = scope.args[int(fields[1]) if len(fields) > 1 else 1 :]
        elif (script := self.script_of(fields, at)) is not None:
            self.follow(script, scope, at)
        else:
            self.setup_or_entry(fields, env, at)

    def export(self, words: list[Word], scope: Scope, at: str) -> None:
        """``export NAME=value`` (the value is not split) and ``export "$KEY"="$VALUE"`` (the
        word's expansion names the variable, as bash reads it)."""
        for word in words:
            if (m := _assignment(word)) is not None and not m.group(2):
                pairs = [(m.group(1), "=", expand_text(_value_word(word), scope))]
            else:
                pairs = [f.partition("=") for f in expand_fields(word, scope)]
            for name, eq, value in pairs:
                if not _IDENTIFIER.fullmatch(name):
                    if self.errexit:
                        raise RecipeError(
                            f"{at}: `export {name}{eq}{value}`: not a valid identifier, and the "
                            "script runs with `set -e`: bash stops here",
                            fix="pass the script's arguments as KEY=VALUE",
                        )
                    continue
                if eq:
                    scope.values[name] = value
                scope.exported.add(name)
                self.steps.append(PodStep(StepKind.EXPORT, (name, scope.values.get(name, "")), at))

    def options(self, fields: list[str], scope: Scope) -> None:
        for flag in fields:
            if flag.startswith(("-", "+")) and flag[1:].isalpha():
                if "e" in flag:
                    self.errexit = flag[0] == "-"
                if "u" in flag:
                    scope.nounset = flag[0] == "-"

    def script_of(self, fields: list[str], at: str) -> tuple[str, str, str, list[str]] | None:
        """``bash X.sh ARGS`` or ``./X.sh ARGS``: the script's path, text, origin and args."""
        if fields[0] in _SHELLS and len(fields) > 1 and not fields[1].startswith("-"):
            path, args = fields[1], fields[2:]
        elif fields[0].endswith(".sh") and "/" in fields[0]:
            path, args = fields[0], fields[1:]
        else:
            return None
        path = _normal(path)
        found = self.files.script(path)
        if found is None:
            if self.files.exists(path) is False:
                raise MissingScriptError(path, at)
            return None
        return path, found[0], found[1], args

    def follow(self, script: tuple[str, str, str, list[str]], scope: Scope, at: str) -> None:
        path, text, origin, args = script
        if len(self.scripts) >= _MAX_DEPTH:
            raise RecipeError(f"{at}: scripts run scripts more than {_MAX_DEPTH} deep", fix="")
        self.scripts.append((path, origin))
        self.steps = [s for s in self.steps if not _makes_runnable(s, path)]
        saved = self.errexit
        self.errexit = False
        self.run(parse_script(text, origin), scope.child(args), origin)
        self.errexit, self.stopped = saved, False

    def setup_or_entry(self, fields: list[str], env: list[tuple[str, str]], at: str) -> None:
        if fields[0] == "cd" and len(fields) == 2:
            self.cwd = _normal(f"{self.cwd}/{fields[1]}" if self.cwd else fields[1])
        if fields[:2] == ["git", "checkout"] and len(fields) == 3 and self.cwd:
            self.checkouts.append((self.cwd, fields[2]))
        kind = StepKind.ENTRY if is_python(Word((Lit(fields[0]),), 0)) else StepKind.SETUP
        shown = tuple(f"{n}={v}" for n, v in env) + tuple(fields)
        self.steps.append(PodStep(kind, shown, at, self.cwd))


class _Exists(Mapping[str, bool | None]):
    """``[ -f PATH ]`` answered from the files the tool knows."""

    def __init__(self, files: ScriptFiles) -> None:
        self.files = files

    def __getitem__(self, key: str) -> bool | None:
        return self.files.exists(_normal(key))

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _assignment(word: Word) -> re.Match[str] | None:
    """``NAME=...`` or ``NAME+=...`` as bash recognises an assignment: the name unquoted."""
    first = word.parts[0] if word.parts else None
    if not isinstance(first, Lit) or first.quote is not Quote.NONE:
        return None
    return _ASSIGN.match(first.text)


def _value_word(word: Word) -> Word:
    """The value of ``NAME=value`` / ``NAME+=value`` as a word."""
    first = word.parts[0]
    text = first.text if isinstance(first, Lit) else ""
    rest = text[text.index("=") + 1 :]
    return Word(((Lit(rest),) if rest else ()) + word.parts[1:], word.line)


def _normal(path: str) -> str:
    parts: list[str] = []
    for piece in path.split("/"):
        if piece in ("", "."):
            continue
        if piece == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(piece)
    return "/".join(parts)


def _makes_runnable(step: PodStep, path: str) -> bool:
    """``chmod +x <path>`` before the script is run: the tool runs the script's own steps."""
    return (
        step.kind is StepKind.SETUP
        and step.words[:1] == ("chmod",)
        and _normal(step.words[-1]) == path
    )


def evaluate(command: str, files: ScriptFiles, where: str) -> ScriptRun:
    """The steps of the pod's ``command`` (a shell command line, as the pod's shell gets it)."""
    evaluator = _Evaluator(files)
    evaluator.run(parse_script(command, where), Scope(), where)
    return ScriptRun(tuple(evaluator.steps), tuple(evaluator.scripts), tuple(evaluator.checkouts))
