"""A README recipe that submits a training script, read as the same request as a
``run_recipe.sh``.

tpu-recipes' v5p GPT3-175B, Llama2-7B and Mixtral-8x7B READMEs submit ``--command "bash
<script> RUN_NAME=... OUTPUT_PATH=..."`` where the script is MaxText's (at the revision the image
is built from) or the recipe's own, copied into the image; the SDXL and Stable Diffusion 2
READMEs run their own script, which checks MaxDiffusion out at a commit. This module expands the
README as the submitting shell would (:mod:`script_readme`), works out what the script makes
the pod do at the MaxText revision the README implies (:mod:`script_eval`, scripts from
:mod:`training_scripts`), and writes that as the equivalent ``run_recipe.sh`` text, read by
:func:`parse_recipe`: the plan, checks and scripts then treat it like any recipe. The workload,
run name, output directory, project, zone, cluster and image are the tool's; every other value
is the README's (``--var NAME=VALUE`` changes one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tpu_trainer.catalog.accelerators import ACCELERATORS
from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.benchmark_invocation import pinned_revision
from tpu_trainer.recipes.reader import parse_recipe
from tpu_trainer.recipes.recipe import Recipe, RecipeProblem, StepKind
from tpu_trainer.recipes.script_eval import MissingScriptError, ScriptRun, evaluate
from tpu_trainer.recipes.script_files import RecipeFiles, entry_paths
from tpu_trainer.recipes.script_readme import (
    SIZE_VARIABLE,
    ScriptReadme,
    find_script_readme,
    flag_pairs,
    submission,
)
from tpu_trainer.recipes.script_text import generated_recipe
from tpu_trainer.recipes.script_words import Scope, is_symbolic, render, symbolic
from tpu_trainer.recipes.training_scripts import (
    SourceRevision,
    TrainingScripts,
    blob_id,
    training_scripts,
)

REVISION_VARIABLE = "MAXTEXT_REVISION"
MAXTEXT = "maxtext"
TOOL_VALUES = {
    "CLUSTER_NAME": "CLUSTER_NAME",
    "PROJECT": "PROJECT_ID",
    "PROJECT_ID": "PROJECT_ID",
    "ZONE": "ZONE",
    "WORKLOAD_NAME": "WORKLOAD_NAME",
    "RUN_NAME": "WORKLOAD_NAME",
    "OUTPUT_PATH": "BASE_OUTPUT_DIR",
    "BASE_OUTPUT_DIR": "BASE_OUTPUT_DIR",
    "LOCAL_IMAGE_NAME": "WORKLOAD_IMAGE",
}
"""README variables whose value is the tool's (the workload, run name, output directory, ...)."""
_CLONES_MAXTEXT = re.compile(r"git\s+clone\s+\S*/maxtext(?:\.git)?\b", re.IGNORECASE)
_FAMILY = re.compile(r"\b(v5p|v6e|v5litepod|v5e|v4|tpu7x)\b")
_SMALLEST = {"v5p": "v5p-8", "v6e": "v6e-8", "v5e": "v5litepod-8", "v5litepod": "v5litepod-8"}


@dataclass(frozen=True, slots=True)
class _Read:
    """The README, its submission and the source revision it is read at."""

    readme: ScriptReadme
    folder: Path
    flags: list[tuple[str, str | None]]
    command: str
    variables: dict[str, tuple[str, int]]
    """README variables the submission used: value and line."""


@dataclass(frozen=True, slots=True)
class PodRun:
    """What a README recipe makes the pod do, at the revision it is read at."""

    read: _Read
    run: ScriptRun
    revision: SourceRevision | None
    """The MaxText revision the command runs in (None: the recipe's own scripts only)."""
    why: str
    problems: tuple[RecipeProblem, ...]


def pod_run(path: Path, text: str, variables: Mapping[str, str] | None = None) -> PodRun:
    """Expand the README at ``path`` and work out its pod's steps (``variables``: ``--var``)."""
    readme = find_script_readme(text, str(path))
    if readme is None:
        raise RecipeError(
            f'{path}: no `xpk workload create ... --command "bash <script> ..."` found',
            fix="is this a tpu-recipes README recipe?",
        )
    given = dict(variables or {})
    read = _read(readme, path.parent, given)
    data = training_scripts()
    problems: list[RecipeProblem] = []
    revision, why = _revision(read, text, given, data) if home_repository(text) else (None, "")
    run, used = _run(read, revision, data, problems, why, explicit=REVISION_VARIABLE in given)
    if used is not None and used is revision:
        problems.append(
            RecipeProblem(
                "recipe-maxtext-revision",
                f"the command runs at MaxText {used.short} ({used.date}): {why}",
                "",
                read.readme.line,
                passed=True,
            )
        )
    problems += _checkout_findings(read, run, data)
    return PodRun(read, run, used, why, tuple(problems))


def script_recipe(path: Path, text: str, variables: Mapping[str, str] | None = None) -> Recipe:
    """Read a README at ``path`` that submits ``--command "bash <script> ..."``."""
    found = pod_run(path, text, variables)
    read, run, used = found.read, found.run, found.revision
    problems = list(found.problems)
    device = _device_type(read, text, problems, variables or {})
    header = f"{path}: {run.scripts[0][0] if run.scripts else read.command}"
    exports = {n: v for n, (v, _) in read.variables.items() if n not in TOOL_VALUES}
    if used is not None:
        header += f" at MaxText {used.short} ({used.date}; {found.why})"
        exports[REVISION_VARIABLE] = used.commit
    recipe = parse_recipe(
        generated_recipe(header, exports, read.flags, device, run.steps), str(path)
    )
    return _pointed(recipe, read, problems)


def home_repository(text: str) -> str | None:
    """``maxtext`` when the README clones MaxText (its command runs in that checkout); None
    when the command runs the recipe's own scripts only."""
    return MAXTEXT if _CLONES_MAXTEXT.search(text) else None


def _read(readme: ScriptReadme, folder: Path, given: dict[str, str]) -> _Read:
    fixed = {name: symbolic(tool) for name, tool in TOOL_VALUES.items()}
    fixed |= {k: v for k, v in given.items() if k != REVISION_VARIABLE}
    scope = Scope()
    sub = submission(readme, scope, fixed, _size_block(given.get(SIZE_VARIABLE), readme.sizes()))
    flags = flag_pairs(sub.argv)
    stray = next((name for name, value in flags if not name.startswith("--")), None)
    if stray is not None:
        raise RecipeError(
            f"{readme.source}:{readme.line}: xpk would get the stray word `{render(stray)}`",
            fix="quote the flag values in the README, or pass --var for the variable left empty",
        )
    command = dict(flags).get("--command")
    if not command:
        raise RecipeError(f"{readme.source}:{readme.line}: no --command", fix="add --command")
    used = {
        name: (scope.values.get(name, ""), sub.lines.get(name, readme.line))
        for name in sorted(scope.used)
        if name in sub.lines or name in given
    }
    if sub.size is not None:
        used[SIZE_VARIABLE] = (sub.size, sub.lines.get(SIZE_VARIABLE, readme.line))
    return _Read(readme, folder, flags, command, used)


def _chips(device_type: str) -> tuple[str, int] | None:
    """Family prefix and chip count of ``v5p-1024`` (TensorCores counted) or ``v5p-4x8x64``."""
    prefix, _, size = device_type.rpartition("-")
    accelerator = next((a for a in ACCELERATORS.values() if a.xpk_prefix == prefix), None)
    if accelerator is None or not size.replace("x", "").isdigit():
        return None
    if "x" in size:
        return prefix, math.prod(int(n) for n in size.split("x"))
    per_chip = accelerator.tensorcores_per_chip if accelerator.xpk_number_counts_tensorcores else 1
    return prefix, int(size) // per_chip


def _size_block(wanted: str | None, sizes: list[str]) -> str | None:
    """The per-size block ``--var TPU_TYPE`` picks: by its TPU type, or by a topology of the
    same size (``v5p-4x8x64`` for the ``v5p-4096`` block, a custom topology a README may ask
    for)."""
    if wanted is None or not sizes or wanted in sizes:
        return wanted if sizes else None
    chips = _chips(wanted)
    return next((s for s in sizes if chips is not None and _chips(s) == chips), wanted)


def _device_type(
    read: _Read, text: str, problems: list[RecipeProblem], given: Mapping[str, str]
) -> str:
    """The README's ``--tpu-type``; ``--var TPU_TYPE`` where the README leaves it open, else
    the family's smallest slice, reported."""
    value = next((v for n, v in read.flags if n in ("--tpu-type", "--device-type")), None)
    if value and not value.startswith("<") and not is_symbolic(value):
        return value
    if SIZE_VARIABLE in given:
        read.variables[SIZE_VARIABLE] = (given[SIZE_VARIABLE], read.readme.line)
        return given[SIZE_VARIABLE]
    family = _FAMILY.search(next((ln for ln in text.splitlines() if ln.startswith("#")), ""))
    fallback = _SMALLEST.get(family.group(1) if family else "v5p", "v5p-8")
    problems.append(
        RecipeProblem(
            "recipe-tpu-type",
            f"the README leaves the TPU type to the user (`--tpu-type={render(value or '')}`); "
            f"planned on {fallback}, the smallest slice of its family",
            f"pass --var {SIZE_VARIABLE}=<type> (e.g. {fallback}) with the slice to train on",
            read.readme.line,
        )
    )
    return fallback


def _revision(
    read: _Read, text: str, given: Mapping[str, str], data: TrainingScripts
) -> tuple[SourceRevision, str]:
    """The MaxText revision the README implies: a pin (``--var``, or ``git checkout``), else the
    revision current on the README's last change in tpu-recipes."""
    source = read.readme.source
    pin = given.get(REVISION_VARIABLE) or pinned_revision(text)
    if pin:
        found = data.find(MAXTEXT, pin)
        if found is None:
            raise RecipeError(
                f"{source}: MaxText {pin} is not a revision whose scripts the tool ships",
                fix=f"pass --var {REVISION_VARIABLE}= one of {data.listed(MAXTEXT)}, or add it "
                "with tools/build_training_scripts.py",
            )
        origin = "--var" if REVISION_VARIABLE in given else "pinned by the README"
        return found, origin
    known = data.readmes.get(blob_id(text.encode("utf-8")))
    current = data.find(MAXTEXT, known.current.get(MAXTEXT, "")) if known else None
    if known is None or current is None:
        raise RecipeError(
            f"{source}: which MaxText revision runs this recipe? The README pins none, and it "
            "is not a tpu-recipes README whose last change the tool knows",
            fix=f"pass --var {REVISION_VARIABLE}=<rev>; the tool ships {data.listed(MAXTEXT)}",
        )
    return current, (
        f"current on {known.date}, the README's last change in tpu-recipes "
        f"({known.commit[:8]}); it pins no revision"
    )


def _run(
    read: _Read,
    revision: SourceRevision | None,
    data: TrainingScripts,
    problems: list[RecipeProblem],
    why: str,
    *,
    explicit: bool,
) -> tuple[ScriptRun, SourceRevision | None]:
    """The pod's steps at ``revision``, or — when a file the command needs is not there — at
    the newest earlier shipped revision that has it (reported as a failed check)."""
    where = f"{read.readme.source}:{read.readme.line}: --command"
    candidates = [revision] if revision is None or explicit else [revision, *data.earlier(revision)]
    missing: list[tuple[SourceRevision | None, str]] = []
    for candidate in candidates:
        files = RecipeFiles(read.folder, candidate)
        try:
            run = evaluate(read.command, files, where)
        except MissingScriptError as e:
            missing.append((candidate, e.path))
            continue
        absent = next((p for p in entry_paths(run) if files.exists(p) is False), None)
        if absent is not None:
            missing.append((candidate, absent))
            continue
        if candidate is not revision and revision is not None and candidate is not None:
            problems.append(_revision_problem(read, revision, candidate, missing[0][1], why))
        return _entry_checked(run, where), candidate
    shown = ", ".join(f"{r.short if r else '?'} lacks {p}" for r, p in missing)
    raise RecipeError(
        f"{where}: no shipped MaxText revision has what the command runs ({shown})",
        fix=f"pass --var {REVISION_VARIABLE}=<rev> with a revision that has it; the tool ships "
        f"{data.listed(MAXTEXT)}",
    )


def _entry_checked(run: ScriptRun, where: str) -> ScriptRun:
    if not any(s.kind is StepKind.ENTRY for s in run.steps):
        raise RecipeError(
            f"{where}: the script runs no `python3` training program",
            fix="is this a MaxText or MaxDiffusion training script?",
        )
    return run


def _revision_problem(
    read: _Read, dated: SourceRevision, used: SourceRevision, path: str, why: str
) -> RecipeProblem:
    gone = dated.gone.get(path)
    moved = ""
    if gone is not None:
        went = f"moved to {gone.to}" if gone.to else "removed"
        moved = f" ({went} in {gone.commit[:8]}, {gone.date})"
    return RecipeProblem(
        "recipe-maxtext-revision",
        f"the command runs {path}, which MaxText {dated.short} ({dated.date}; {why}) does not "
        f"have{moved}; planned at {used.short} ({used.date}), the newest shipped revision "
        "that has it",
        f"build the image from that revision (`git checkout {used.commit[:9]}` in the README, "
        f"or maxtext_branch: {used.commit[:9]}) and pass --var {REVISION_VARIABLE}={used.short}",
        read.readme.line,
    )


def _checkout_findings(read: _Read, run: ScriptRun, data: TrainingScripts) -> list[RecipeProblem]:
    """The revision a script's own ``cd <clone> && git checkout <rev>`` runs, and whether it
    has the training program and config run there."""
    out: list[RecipeProblem] = []
    for directory, commit in run.checkouts:
        repo = Path(directory).name.lower()
        revision = data.find(repo, commit)
        if revision is None:
            continue
        lacking = [p for p in entry_paths(run, directory) if revision.exists(p) is False]
        said = f"the script checks {repo} out at {revision.short} ({revision.date})"
        out.append(
            RecipeProblem(
                f"recipe-{repo}-revision",
                said + (f", which has no {', '.join(lacking)}" if lacking else ""),
                "check out a revision that has it (the script's COMMITS argument)"
                if lacking
                else "",
                read.readme.line,
                passed=not lacking,
            )
        )
    return out


def _pointed(recipe: Recipe, read: _Read, problems: list[RecipeProblem]) -> Recipe:
    """Variables and flags point at the README's lines, not at the text written here."""
    lines = {name: line for name, (_, line) in read.variables.items()}
    return replace(
        recipe,
        variables=tuple(
            replace(v, line=lines.get(v.name, read.readme.line)) for v in recipe.variables
        ),
        xpk_flags=tuple(replace(f, line=read.readme.line) for f in recipe.xpk_flags),
        problems=tuple(problems),
    )
