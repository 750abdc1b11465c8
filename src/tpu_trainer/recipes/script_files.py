"""The files a training script reaches in the pod: the recipe's own folder (its scripts, copied
into the image as the README says) and the MaxText (or MaxDiffusion) revision the image holds,
as the shipped data records it."""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.recipes.recipe import StepKind
from tpu_trainer.recipes.script_eval import ScriptRun
from tpu_trainer.recipes.training_scripts import SourceRevision

_CONFIG_SUFFIXES = (".yml", ".yaml")


class RecipeFiles:
    """A script named in the command is looked for in the recipe's folder first (at the path
    named, then by its name in the folder and in its ``scripts/``: the README has the user copy
    it there), then in ``revision``'s shipped scripts."""

    def __init__(self, folder: Path, revision: SourceRevision | None) -> None:
        self.folder = folder
        self.revision = revision

    def _local(self, path: str) -> Path | None:
        name = Path(path).name
        for candidate in (self.folder / path, self.folder / name, self.folder / "scripts" / name):
            if candidate.is_file():
                return candidate
        return None

    def script(self, path: str) -> tuple[str, str] | None:
        local = self._local(path)
        if local is not None:
            return local.read_text(encoding="utf-8"), str(local)
        if self.revision is not None and path in self.revision.scripts:
            where = f"{self.revision.repository} {self.revision.short}:{path}"
            return self.revision.scripts[path], where
        return None

    def exists(self, path: str) -> bool | None:
        if self._local(path) is not None:
            return True
        return self.revision.exists(path) if self.revision is not None else None


def program_paths(words: tuple[str, ...]) -> tuple[list[str], int]:
    """The files a training program's command line names — the program (``-m a.b`` is
    ``a/b.py``) and its base config — and where its arguments start."""
    i = 0
    while i < len(words) and "=" in words[i] and not words[i].startswith("-"):
        i += 1  # NAME=value environment
    i += 1  # the interpreter
    while i < len(words) and words[i].startswith("-") and words[i] != "-m":
        i += 1
    if i >= len(words):
        return [], len(words)
    if words[i] == "-m" and i + 1 < len(words):
        found = [words[i + 1].replace(".", "/") + ".py"]
        i += 2
    else:
        found = [words[i]]
        i += 1
    if i < len(words) and words[i].endswith(_CONFIG_SUFFIXES):
        found.append(words[i])
        i += 1
    return found, i


def entry_paths(run: ScriptRun, directory: str = "") -> list[str]:
    """The program and config paths of every training program run in ``directory`` (relative
    to it: the pod's starting directory, or a clone the script changed into)."""
    out: list[str] = []
    for step in run.steps:
        if step.kind is StepKind.ENTRY and step.cwd == directory:
            out += program_paths(step.words)[0]
    return out
