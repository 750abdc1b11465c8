"""The reader that builds the recipe model from a tpu-recipes ``run_recipe.sh``.

The script is read, never run. Shell variables that only build strings (``XLA_FLAGS``,
``MAXTEXT_ARGS``) are inlined; exported variables stay symbolic as ``${NAME}``, because the
tool supplies their values (from the configuration) when it writes the submit script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.pod_steps import assignment as _assignment
from tpu_trainer.recipes.pod_steps import bash_c_script, entry_alternatives, script_text
from tpu_trainer.recipes.pod_steps import entry_point as _entry_point
from tpu_trainer.recipes.pod_steps import framework_of as _framework
from tpu_trainer.recipes.pod_steps import step_kind as _step_kind
from tpu_trainer.recipes.pod_steps import xla_flags_of as _xla_flags
from tpu_trainer.recipes.recipe import (
    CommandStep,
    EntryPoint,
    Framework,
    Placeholding,
    Recipe,
    RecipeVariable,
    StepKind,
    XpkFlag,
)
from tpu_trainer.recipes.script_blocks import skip_check_loop, skip_if_block
from tpu_trainer.recipes.shell_quote import pod_quote_state, pod_text_problem
from tpu_trainer.recipes.shell_words import (
    REF_CLOSE,
    REF_OPEN,
    CmdSub,
    Lit,
    Op,
    Placeholder,
    Redir,
    Ref,
    ShellSyntaxError,
    Token,
    Var,
    Word,
    split_commands,
    tokenize,
)

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_SPLITTERS = frozenset({"IFS"})
_ARGUMENTS = re.compile(r"(?:^|_)(?:ARGS|FLAGS|OVERRIDES)$")
_SPECIAL_FIX = "write the separator (a space) or the value itself"


def _special_message(name: str) -> str:
    return (
        f"${{{name}}} is the shell's own {name}: its value would split or rewrite the "
        "command in the pod's shell"
    )


_TOOL_COMPUTED = frozenset({"WORKLOAD_NAME"})


@dataclass
class _Assigned:
    value: Word
    exported: bool
    line: int
    computed: bool = False
    """Set by a command substitution: never inlined (only WORKLOAD_NAME, which the tool
    computes itself, may be built from it)."""


class _Reader:
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.lines = text.splitlines()
        self.assigned: dict[str, _Assigned] = {}
        self.variables: list[RecipeVariable] = []
        self.shell_options: list[str] = []
        self.xpk_words: list[Word] | None = None
        self.expansions = False
        """Accept ``${A:-default}`` and ``${A[@]}`` (Cluster Toolkit recipes use them)."""

    def fail(self, message: str, line: int, fix: str = "") -> RecipeError:
        shown = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        where = f"{self.source}:{line}: " if line else f"{self.source}: "
        detail = f"\n    {line} | {shown}" if shown else ""
        return RecipeError(
            where + message + detail,
            fix=fix or "rewrite that line with plain assignments and one `xpk workload create`",
        )

    # ---- top level ----------------------------------------------------------
    def read(self) -> Recipe:
        try:
            tokens = tokenize(self.text, expansions=self.expansions)
        except ShellSyntaxError as e:
            raise self.fail(str(e), e.line) from None
        for words, line in self.statements(tokens):
            self.statement(words, line)
        if self.xpk_words is None:
            raise self.no_submission()
        return self.build(self.xpk_words)

    def no_submission(self) -> RecipeError:
        return RecipeError(
            f"{self.source}: no `xpk workload create` command found",
            fix="is this a tpu-recipes run_recipe.sh? The tool reads recipes that submit "
            "with `xpk workload create ... --command=...`",
        )

    def statements(self, tokens: list[Token]) -> list[tuple[list[Word], int]]:
        out: list[tuple[list[Word], int]] = []
        current: list[Word] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if isinstance(tok, Word) and not current and tok.literal == "if":
                i = skip_if_block(tokens, i, self.fail)
                continue
            if isinstance(tok, Word) and not current and tok.literal == "for":
                i = skip_check_loop(tokens, i, self.fail)
                continue
            if isinstance(tok, Op):
                if tok.text in ("\n", ";"):
                    if current:
                        out.append((current, current[0].line))
                    current = []
                    i += 1
                    continue
                raise self.fail(
                    f"operator '{tok.text}' is not supported at the top level", tok.line
                )
            current.append(tok)
            i += 1
        if current:
            out.append((current, current[0].line))
        return out

    def statement(self, words: list[Word], line: int) -> None:
        head = words[0].literal
        if head == "export" or _assignment(words[0]) is not None:
            exported = head == "export"
            for w in words[1:] if exported else words:
                self.assign(w, exported)
            return
        if head in ("source", ".", "echo"):
            return
        if head == "set":
            self.shell_options.append(" ".join(w.render() for w in words[1:]))
            return
        if head == "xpk":
            self.xpk_words = self.submission(words, line)
            return
        raise self.fail(f"unsupported command `{words[0].render()}`", line)

    def submission(self, words: list[Word], line: int) -> list[Word]:
        """The flags of the one ``xpk workload create`` (``gcluster job submit``) command."""
        tool, *expected = self.submit_command.split()
        sub = [w.literal for w in words[1:3]]
        if sub != expected:
            raise self.fail(
                f"`{tool} {' '.join(s or '?' for s in sub)}` is not supported",
                line,
                fix=f"the recipe must submit with `{self.submit_command}`",
            )
        if self.xpk_words is not None:
            raise self.fail(f"a second `{self.submit_command}`", line, fix="keep one submission")
        return words[3:]

    def assign(self, word: Word, exported: bool) -> None:
        split = _assignment(word)
        if split is None:
            if exported and word.literal and _ASSIGN.match(word.literal + "=") is not None:
                return  # `export NAME` with no value
            raise self.fail(f"`{word.render()}` is not an assignment", word.line)
        name, value = split
        computed = any(
            isinstance(p, CmdSub) or (isinstance(p, Var) and "$(" in p.pattern) for p in value.parts
        )
        if computed and not exported:
            self.assigned[name] = _Assigned(value, exported, word.line, computed=True)
            return  # refused where it is used, unless only WORKLOAD_NAME uses it
        if computed and name not in _TOOL_COMPUTED:
            raise self.fail(
                f"command substitution in {name} is not supported: the tool never runs "
                "commands from a recipe",
                word.line,
                fix=f"write the value of {name} literally",
            )
        self.assigned[name] = _Assigned(value, exported, word.line)
        if exported:
            self.variables = [v for v in self.variables if v.name != name]
            self.variables.append(RecipeVariable(name, value.render(), word.line, computed))

    # ---- expansion ---------------------------------------------------------------
    def expand(self, word: Word, seen: frozenset[str] = frozenset()) -> str:
        """First-level expansion: inline string-building variables, keep exported ones symbolic."""
        out: list[str] = []
        for part in word.parts:
            if isinstance(part, Lit | Redir):
                out.append(part.text)
            elif isinstance(part, Var):
                out.append(self.expand_var(part, word.line, seen))
            elif isinstance(part, Ref):
                out.append(REF_OPEN + part.name + REF_CLOSE)
            elif isinstance(part, Placeholder):
                out.append("<" + part.name + ">")
            else:
                raise self.fail("command substitution outside WORKLOAD_NAME", word.line)
        return "".join(out)

    def expand_var(self, part: Var, line: int, seen: frozenset[str]) -> str:
        if part.name in _SPLITTERS:
            raise self.fail(
                _special_message(part.name), self.line_of(part.name, line), fix=_SPECIAL_FIX
            )
        if part.indirect:
            raise self.fail(
                f"indirect expansion ${{!{part.name}}} is read only in the recipe's check of "
                "its own variables (a `for` loop over their names)",
                line,
            )
        known = self.assigned.get(part.name)
        if known is None or known.exported:
            return REF_OPEN + part.name + REF_CLOSE
        if known.computed:
            raise self.fail(
                f"command substitution in {part.name} is not supported: the tool never runs "
                "commands from a recipe",
                known.line,
                fix=f"write the value of {part.name} literally",
            )
        if part.name in seen:
            raise self.fail(f"{part.name} refers to itself", line)
        if part.pattern:
            raise self.fail(f"pattern substitution on {part.name}", line)
        return self.expand(known.value, seen | {part.name})

    # ---- the submission -----------------------------------------------------------
    def build(self, words: list[Word]) -> Recipe:
        flags: list[XpkFlag] = []
        command: tuple[str, int] | None = None
        i = 0
        while i < len(words):
            w = words[i]
            expanded = self.expand(w)
            if not expanded.startswith("--"):
                raise self.fail(f"unexpected {self.submitter} argument `{w.render()}`", w.line)
            name, eq, value = expanded.partition("=")
            if not eq and i + 1 < len(words) and not self.expand(words[i + 1]).startswith("--"):
                value = self.expand(words[i + 1])
                eq = "="
                i += 1
            if name == "--command":
                self.check_inlined(words[i])
                command = (value, w.line)
            flags.append(XpkFlag(name, _display(value) if eq else None, w.line))
            i += 1
        self.check_flags(flags, words[0].line)
        if command is None:
            raise self.fail(f"{self.submit_command} has no --command", words[0].line)
        steps = self.pod_steps(*command)
        entries = [s for s in steps if s.kind is StepKind.ENTRY]
        if not entries:
            raise self.fail(
                "the --command runs no `python3 -m <module>` training program", command[1]
            )
        problem = entry_alternatives(steps)
        if problem is not None:
            raise self.fail(
                f"in --command: {problem}",
                command[1],
                fix="run one training program (an `if`/`else` may choose its entry point by "
                "the image's MaxText layout, with the same arguments in both branches)",
            )
        entry = _entry_point(entries[-1].words)
        framework = _framework(entry.module)
        if framework is None:
            raise self.fail(
                f"entry module `{entry.module}` is neither MaxText nor MaxDiffusion", command[1]
            )
        return Recipe(
            source=self.source,
            variables=tuple(self.variables),
            xla_flags=_xla_flags(steps),
            entry=entry,
            xpk_flags=tuple(flags),
            steps=steps,
            framework=framework,
            args_variable=self.args_variable(framework),
            placeholders=self.placeholders(entry),
            shell_options=tuple(self.shell_options),
            submitter=self.submitter,
        )

    submitter = "xpk"
    submit_command = "xpk workload create"

    def check_flags(self, flags: list[XpkFlag], line: int) -> None:
        if not any(f.name in ("--device-type", "--tpu-type") for f in flags):
            raise self.fail("xpk workload create has no --device-type or --tpu-type", line)

    def check_inlined(self, word: Word) -> None:
        """Refuse argument and flag variables whose text would be shell syntax in the pod's
        shell (``MAXTEXT_ARGS="a=1; touch x"`` would end the training command and run another).
        Other string variables may hold the recipe's own setup commands: they show as steps."""
        prefix = ""
        for part in word.parts:
            piece = self.expand(Word((part,), word.line))
            known = self.assigned.get(part.name) if isinstance(part, Var) else None
            if (
                isinstance(part, Var)
                and known is not None
                and not known.exported
                and _ARGUMENTS.search(part.name) is not None
            ):
                problem, needle = pod_text_problem(piece, pod_quote_state(prefix))
                if problem:
                    raise self.fail(
                        f"{part.name} holds {problem}: in the pod's shell it would not stay "
                        "arguments of the training program",
                        self.line_of(needle, known.line),
                        fix=f"remove it from {part.name}; write each argument as key=value "
                        "(quote a value that needs spaces)",
                    )
            prefix += piece

    def line_of(self, needle: str, start: int) -> int:
        """The first line from ``start`` on holding ``needle`` (``start`` when none does)."""
        for n in range(start, len(self.lines) + 1):
            text = self.lines[n - 1]
            if (needle == "\n" and not text.rstrip().endswith("\\")) or (
                needle.strip() and needle in text
            ):
                return n
        return start

    def pod_steps(self, command: str, line: int) -> tuple[CommandStep, ...]:
        try:
            tokens = tokenize(command, line, expansions=self.expansions, redirects=True)
            script = bash_c_script(tokens)
            if script is not None:
                inner = script_text(script)
                if inner is None:
                    raise self.fail(
                        "in --command: a `bash -c` script whose references the pod's own shell would "
                        "expand before bash runs it",
                        line,
                        fix="write the script after `bash -c` in single quotes",
                    )
                tokens = tokenize(inner, line, expansions=True, redirects=True)
            commands = split_commands(tokens, frozenset({"&&", "|", ";", "\n", "||"}))
        except ShellSyntaxError as e:
            raise self.fail(f"in --command: {e}", line) from None
        steps: list[CommandStep] = []
        previous = ""
        for cmd_words, _ in commands:
            for w in cmd_words:
                special = next(
                    (p.name for p in w.parts if isinstance(p, Var | Ref) and p.name in _SPLITTERS),
                    None,
                )
                if special is not None:
                    raise self.fail(_special_message(special), line, fix=_SPECIAL_FIX)
        for cmd_words, sep in commands:
            steps.append(CommandStep(_step_kind(cmd_words, previous), tuple(cmd_words), sep))
            previous = sep
        return tuple(steps)

    def args_variable(self, framework: Framework) -> str:
        wanted = "MAXDIFFUSION_ARGS" if framework is Framework.MAXDIFFUSION else "MAXTEXT_ARGS"
        for name in (wanted, "MAXTEXT_ARGS", "MAXDIFFUSION_ARGS"):
            if name in self.assigned:
                return name
        return wanted

    def placeholders(self, entry: EntryPoint) -> tuple[Placeholding, ...]:
        found: list[Placeholding] = []
        for word in entry.args:
            for part in word.parts:
                if isinstance(part, Placeholder):
                    needle = f"<{part.name}>"
                    line = next(
                        (
                            n
                            for n, text in enumerate(self.lines, 1)
                            if needle in text and not text.lstrip().startswith("#")
                        ),
                        0,
                    )
                    found.append(Placeholding(part.name, word.render(), line))
        return tuple(found)


def _display(expanded: str) -> str:
    return expanded.replace(REF_OPEN, "${").replace(REF_CLOSE, "}")


def parse_recipe(text: str, source: str = "run_recipe.sh") -> Recipe:
    """Read a tpu-recipes ``run_recipe.sh``; ``source`` names it in errors."""
    return _Reader(text, source).read()
