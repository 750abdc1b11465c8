"""The reader of tpu-recipes' Cluster Toolkit recipes: ``cluster_toolkit/run_recipe.sh`` scripts
that submit with ``gcluster job submit`` instead of ``xpk workload create``.

They read like the xpk ones (the same XLA flags, MaxText arguments and pod command) with what
Cluster Toolkit adds: the ``gcluster`` binary named through ``${GCLUSTER_BIN:-gcluster}``, a
``while [[ $# -gt 0 ]]; do case ... done`` loop that turns the script's own ``--dry-run`` /
``--dry-run-out FILE`` arguments into an array handed to gcluster, defaults such as
``${WORKLOAD_NAME:-...}``, and a pod command that uploads each worker's ``train.log``.
The script is read, never run.
"""

from __future__ import annotations

import re
from dataclasses import replace

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.pod_steps import assignment as _assignment
from tpu_trainer.recipes.reader import _Reader
from tpu_trainer.recipes.recipe import CommandStep, Recipe, StepKind, XpkFlag
from tpu_trainer.recipes.shell_words import Lit, Quote, Var, Word, tokenize

SUBMITTER = "gcluster"
FOLDER = "cluster_toolkit"
BINARY_VARIABLE = "GCLUSTER_BIN"
_LOOP_START = re.compile(r"^\s*while\s+\[\[\s+\$#\s+-gt\s+0\s+\]\]")
_LOOP_END = re.compile(r"^\s*done\s*$")
_ARRAY_INIT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=\(\)\s*$")
_DRY_RUN_CASES = re.compile(r"^\s*(--dry-run(?:-out)?(?:=\*)?)\)")
_IGNORED = frozenset({"PATH"})
"""Assignments that only set up this machine's shell (``PATH`` for the gcluster bundle)."""
_UPLOAD = (("gcloud", "storage", "cp"), ("gsutil", "cp"))


def looks_like_cluster_toolkit(text: str) -> bool:
    """Whether a script submits with ``gcluster job submit``."""
    return re.search(r"(?:gcluster|\$\{?GCLUSTER_BIN\}?\"?)\s+job\s+submit\b", text) is not None


def _strip_argument_loop(text: str) -> tuple[str, str | None, tuple[str, ...]]:
    """The text with the dry-run argument loop (and the empty array it fills) blanked, line
    numbers kept; the array's name and the dry-run arguments the loop accepts."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _LOOP_START.match(line)), None)
    if start is None:
        return text, None, ()
    end = next((i for i in range(start, len(lines)) if _LOOP_END.match(lines[i])), None)
    if end is None:
        return text, None, ()
    array = None
    if start > 0 and (m := _ARRAY_INIT.match(lines[start - 1])) is not None:
        array = m.group(1)
        start -= 1
    accepted = tuple(
        m.group(1) for line in lines[start : end + 1] if (m := _DRY_RUN_CASES.match(line))
    )
    blanked = lines[:start] + [""] * (end + 1 - start) + lines[end + 1 :]
    return "\n".join(blanked), array, accepted


def _default_of(word: Word, name: str) -> Word | None:
    """``${NAME:-default}`` assigned to NAME itself: the default, as the word it reads as."""
    if len(word.parts) != 1:
        return None
    part = word.parts[0]
    if not isinstance(part, Var) or part.name != name or not part.pattern.startswith(":-"):
        return None
    default = part.pattern[2:]
    tokens = tokenize('"' + default + '"', word.line, expansions=True)
    first = tokens[0]
    return first if isinstance(first, Word) else Word((Lit(default, Quote.DOUBLE),), word.line)


class _ClusterToolkitReader(_Reader):
    submitter = SUBMITTER
    submit_command = "gcluster job submit"

    def __init__(self, text: str, source: str) -> None:
        blanked, self.dry_run_array, self.dry_run_args = _strip_argument_loop(text)
        super().__init__(blanked, source)
        self.lines = text.splitlines()
        self.expansions = True
        self.dry_run_passed = False
        """The submission hands gcluster the loop's array (``"${DRY_RUN_ARG[@]}"``)."""

    def no_submission(self) -> RecipeError:
        return RecipeError(
            f"{self.source}: no `gcluster job submit` command found",
            fix="a Cluster Toolkit recipe submits with `gcluster job submit ... --command ...`",
        )

    def statement(self, words: list[Word], line: int) -> None:
        head = words[0]
        if _is_gcluster(head):
            given = self.submission(words, line)
            self.xpk_words = [w for w in given if not self.is_dry_run(w)]
            self.dry_run_passed = len(self.xpk_words) < len(given)
            return
        if head.literal == "xpk":
            raise self.fail(
                "`xpk` in a Cluster Toolkit recipe",
                line,
                fix="read the folder's xpk/run_recipe.sh with --submitter xpk",
            )
        super().statement(words, line)

    def is_dry_run(self, word: Word) -> bool:
        part = word.parts[0] if len(word.parts) == 1 else None
        return (
            isinstance(part, Var)
            and part.name == self.dry_run_array
            and part.pattern in ("[@]", "[*]")
        )

    def assign(self, word: Word, exported: bool) -> None:
        split = _assignment(word)
        if split is not None and split[0] in _IGNORED:
            return
        if split is not None and (default := _default_of(split[1], split[0])) is not None:
            earlier = self.assigned.get(split[0])
            if earlier is not None and (earlier.computed or earlier.value.render()):
                return  # `${NAME:-d}` after the script set NAME: it keeps that value
            word = Word((Lit(split[0] + "="), *default.parts), word.line)
        if split is not None and split[0] == "WORKLOAD_NAME":
            exported = True  # `NAME=$(...)` then `export NAME`: the tool computes it anyway
        super().assign(word, exported)

    def check_flags(self, flags: list[XpkFlag], line: int) -> None:
        if not any(f.name == "--compute-type" for f in flags):
            raise self.fail("gcluster job submit has no --compute-type", line)

    def read(self) -> Recipe:
        recipe = super().read()
        steps = tuple(_mark_upload(s) for s in recipe.steps)
        dry_run = self.dry_run_args if self.dry_run_passed else ()
        return replace(recipe, steps=steps, dry_run=dry_run)


def _is_gcluster(word: Word) -> bool:
    if word.literal is not None:
        return word.literal.rsplit("/", 1)[-1] == SUBMITTER
    return (
        len(word.parts) == 1
        and isinstance(word.parts[0], Var)
        and word.parts[0].name == BINARY_VARIABLE
        and not word.parts[0].pattern
    )


def _mark_upload(step: CommandStep) -> CommandStep:
    """``then timeout 30s gcloud storage cp train.log ...``: the per-worker log upload."""
    literals = tuple(w.literal for w in step.words)
    for i in range(len(literals)):
        if any(literals[i : i + len(u)] == u for u in _UPLOAD):
            return CommandStep(StepKind.UPLOAD, step.words, step.separator)
    return step


def parse_cluster_toolkit_recipe(text: str, source: str = "run_recipe.sh") -> Recipe:
    """Read a tpu-recipes ``cluster_toolkit/run_recipe.sh``; ``source`` names it in errors."""
    return _ClusterToolkitReader(text, source).read()


XPK_EQUIVALENTS = {
    "--cluster": "--cluster",
    "--project": "--project",
    "--location": "--zone",
    "--name": "--workload",
    "--image": "--docker-image",
    "--base-image": "--base-docker-image",
    "--restarts": "--max-restarts",
    "--num-slices": "--num-slices",
}
"""Each ``gcluster job submit`` flag whose value the tool sets, with the xpk flag that carries the
same value."""


def gcluster_fixed(xpk_fixed: dict[str, str | None]) -> dict[str, str | None]:
    """The values the tool gives gcluster flags, from those it gives their xpk equivalents."""
    return {g: xpk_fixed[x] for g, x in XPK_EQUIVALENTS.items() if x in xpk_fixed}
