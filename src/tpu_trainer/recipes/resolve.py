"""Turning what the user typed into one recipe on disk.

Accepted: a recipe folder (with or without its ``xpk/`` level), a ``run_recipe.sh`` file, or a
model name looked up under the configured tpu-recipes checkout, narrowed by precision,
topology, sequence length and variant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import InputError
from tpu_trainer.recipes.benchmark_invocation import mentions_runner
from tpu_trainer.recipes.folder import RecipeFolder, parse_folder_name
from tpu_trainer.recipes.script_readme import mentions_script_command

RECIPE_FILE = "run_recipe.sh"
README = "README.md"
TRAINING = "training"
PLAIN_VARIANT = "plain"
"""``--variant plain``: the recipe without a storage or other suffix."""
SUBMITTER_FOLDERS = {"xpk": "xpk", "gcluster": "cluster_toolkit"}
"""The folder each submitter's variant of a recipe lives in (``<config>/xpk/run_recipe.sh``,
``<config>/cluster_toolkit/run_recipe.sh``)."""
DEFAULT_SUBMITTER = "xpk"
"""The variant taken when a folder has both and neither the command nor the configuration says."""


@dataclass(frozen=True, slots=True)
class RecipeRef:
    """A located recipe."""

    script: Path
    """The ``run_recipe.sh``."""
    folder: Path
    """Folder the script lives in (where generated scripts are written)."""
    config_dir: Path
    """The ``<seq>-<precision>-...`` folder."""
    model_dir: Path
    """The model's folder (where its README report lives)."""
    model: str
    parsed: RecipeFolder | None
    """The config folder's name, parsed; None when it does not follow the pattern."""


@dataclass(frozen=True, slots=True)
class Filters:
    precision: str | None = None
    topology: str | None = None
    seq: str | None = None
    variant: str | None = None
    submitter: str | None = None
    """``xpk`` or ``gcluster``: which variant of a recipe folder holding both to read."""

    def matches(self, parsed: RecipeFolder | None) -> bool:
        if parsed is None:
            return not any((self.precision, self.topology, self.seq, self.variant))
        if self.precision and parsed.precision.value != self.precision.lower():
            return False
        if self.topology and parsed.topology != self.topology.lower().removeprefix("tpu7x-"):
            return False
        if self.seq and (parsed.seq or "") != self.seq.lower():
            return False
        if self.variant and self.variant.lower() == PLAIN_VARIANT:
            return parsed.suffix is None
        return not (self.variant and (parsed.suffix or "") != self.variant.lower())


def _ref_for_script(script: Path) -> RecipeRef:
    folder = script.parent
    config_dir = folder.parent if folder.name in SUBMITTER_FOLDERS.values() else folder
    model_dir = config_dir.parent
    if model_dir.parent.name == TRAINING:
        # training/trillium/<Model>/<script>.sh, training/v5p/<Model>/README.md, and
        # training/trillium/<Model>/cluster_toolkit/run_recipe.sh: no configuration level
        model_dir = config_dir
    return RecipeRef(
        script=script,
        folder=folder,
        config_dir=config_dir,
        model_dir=model_dir,
        model=model_dir.name,
        parsed=parse_folder_name(config_dir.name),
    )


def _text(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def training_model_dir(script: Path) -> Path | None:
    """``training/<family>/<Model>`` when ``script`` lies inside one (a tpu-recipes checkout,
    whatever the recipe's format and depth), else None."""
    parts = script.parts
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] == TRAINING and i + 3 < len(parts):
            return Path(*parts[: i + 3])
    return None


def report_dir(script: Path, parsed: RecipeFolder | None, model_dir: Path) -> Path | None:
    """The folder whose ``README.md`` a run of the recipe at ``script`` is reported in: the
    model's folder of the Ironwood layout (``<model>/<seq>-<precision>-<device>/[xpk/]...``),
    of any tpu-recipes ``training/<family>/<Model>/`` tree (Trillium scripts, slice folders,
    v5p READMEs, ``cluster_toolkit/``), or, outside such a tree, the folder of a recipe that
    is a README or a script with its README beside it. None for a lone ``run_recipe.sh``
    elsewhere: there is no model folder to write into."""
    if parsed is not None:
        return model_dir
    tree = training_model_dir(script)
    if tree is not None:
        return tree
    if script.name == README or (script.name != RECIPE_FILE and (script.parent / README).is_file()):
        return script.parent
    return None


def is_runner_recipe(path: Path) -> bool:
    """A script or README that runs MaxText's ``benchmarks.benchmark_runner``, or a README that
    submits a training script (``--command "bash <script> ..."``)."""
    text = _text(path) if path.suffix in (".sh", ".md") else None
    if text is None:
        return False
    return mentions_runner(text) or (path.suffix == ".md" and mentions_script_command(text))


def _runner_recipes_in(folder: Path) -> list[Path]:
    scripts = [p for p in sorted(folder.glob("*.sh")) if is_runner_recipe(p)]
    readme = folder / README
    return scripts or ([readme] if is_runner_recipe(readme) else [])


_OTHER_FRAMEWORKS = (("TensorFlow", re.compile(r"\btensorflow[-_a-z]*\b", re.IGNORECASE)),)
_RUNS = "MaxText, MaxDiffusion, Tunix and Hugging Face Transformers programs"


def other_framework(readme: Path) -> InputError | None:
    """A tpu-recipes README that trains with a framework the tool does not run (DLRM V2 on
    TensorFlow): what to do instead."""
    text = _text(readme)
    if text is None:
        return None
    for name, pattern in _OTHER_FRAMEWORKS:
        if pattern.search(text):
            return InputError(
                f"{readme} trains with {name}, on a TPU VM its steps create by hand: tpu-trainer "
                f"runs {_RUNS} (MaxText recipes on GKE through xpk or gcluster, or on a TPU VM "
                "it makes for the run)",
                fix="follow that README's steps yourself; for a Hugging Face Transformers model, "
                "`tpu-trainer hf --device-type <v5p-N> --model <id>` runs it on a TPU VM, and "
                "`tpu-trainer plan` reads a MaxText recipe of the same model if there is one",
            )
    return None


def _variants(folder: Path) -> dict[str, Path]:
    """The submitters whose variant the folder holds, with their scripts."""
    found = {
        name: folder / sub / RECIPE_FILE
        for name, sub in SUBMITTER_FOLDERS.items()
        if (folder / sub / RECIPE_FILE).is_file()
    }
    return dict(sorted(found.items(), key=lambda kv: kv[0] != DEFAULT_SUBMITTER))


def _script_in(folder: Path, submitter: str | None = None) -> Path | None:
    if (folder / RECIPE_FILE).is_file():
        return folder / RECIPE_FILE
    variants = _variants(folder)
    if not variants:
        return None
    if submitter is None:
        return next(iter(variants.values()))
    if submitter not in variants:
        raise InputError(
            f"{folder} has no {submitter} variant ({SUBMITTER_FOLDERS.get(submitter, submitter)}"
            f"/{RECIPE_FILE}); it has: {', '.join(variants)}",
            fix=f"pass --submitter {next(iter(variants))}, or set `submitter:` in the "
            "configuration to a variant the folder has",
        )
    return variants[submitter]


def _describe(refs: list[RecipeRef], base: Path) -> str:
    lines = []
    for ref in refs:
        try:
            shown = ref.folder.relative_to(base)
        except ValueError:
            shown = ref.folder
        lines.append(f"  {shown}")
    return "\n".join(lines)


def recipes_under(root: Path, submitter: str | None = None) -> list[RecipeRef]:
    """Every recipe below ``root``, sorted by path: one per recipe folder, the ``submitter``'s
    variant where a folder has several (xpk when none is asked; folders without the asked
    variant are left out)."""
    out: list[RecipeRef] = []
    seen: set[Path] = set()
    for script in sorted(root.rglob(RECIPE_FILE)):
        folder = script.parent
        if folder.name not in SUBMITTER_FOLDERS.values():
            out.append(_ref_for_script(script))
            continue
        if folder.parent in seen:
            continue
        seen.add(folder.parent)
        variants = _variants(folder.parent)
        chosen = variants.get(submitter) if submitter else next(iter(variants.values()))
        if chosen is not None:
            out.append(_ref_for_script(chosen))
    return out


def resolve_path(path: Path, submitter: str | None = None) -> RecipeRef:
    """A recipe given as a path; ``submitter`` picks the variant of a folder holding several."""
    if path.is_file():
        if path.name != RECIPE_FILE and not is_runner_recipe(path):
            other = other_framework(path) if path.name == README else None
            if other is not None:
                raise other
            raise InputError(
                f"{path} is not a {RECIPE_FILE}, nor a script or README running benchmark_runner",
                fix=f"give the recipe folder, its {RECIPE_FILE}, or a script or README that "
                "runs `python3 -m benchmarks.benchmark_runner`",
            )
        return _ref_for_script(path)
    if not path.is_dir():
        raise InputError(
            f"{path}: no such file or folder",
            fix="check the path, or give a model name such as `qwen3-235b-a22b --precision fp8`",
        )
    script = _script_in(path, submitter)
    if script is not None:
        return _ref_for_script(script)
    runner = _runner_recipes_in(path)
    if len(runner) == 1:
        return _ref_for_script(runner[0])
    if runner:
        names = "\n".join(f"  {p.name}" for p in runner)
        raise InputError(
            f"{path} holds {len(runner)} benchmark_runner scripts; which one?\n{names}",
            fix="give the script's path",
        )
    inside = recipes_under(path, submitter)
    if len(inside) == 1:
        return inside[0]
    if inside:
        raise InputError(
            f"{path} holds {len(inside)} recipes; which one?\n{_describe(inside, path)}",
            fix="give one of these folders",
        )
    other = other_framework(path / README)
    if other is not None:
        raise other
    raise InputError(
        f"{path} is not a recipe folder: it has no {RECIPE_FILE} (nor xpk/{RECIPE_FILE})",
        fix="give a tpu-recipes folder such as training/ironwood/<model>/<seq>-<precision>-tpu7x-<topology>",
    )


def resolve_model(model: str, root: Path | None, filters: Filters) -> RecipeRef:
    """A recipe given as a model name, looked up under the tpu-recipes checkout ``root``."""
    if root is None:
        raise InputError(
            f"'{model}' is not a path, and no tpu_recipes_path is configured to look it up in",
            fix="give the recipe folder's path, or set `tpu_recipes_path:` in the configuration",
        )
    if not root.is_dir():
        raise InputError(
            f"tpu_recipes_path {root} does not exist",
            fix="clone tpu-recipes there, or fix tpu_recipes_path in the configuration",
        )
    base = root / "training" if (root / "training").is_dir() else root
    all_refs = recipes_under(base, filters.submitter)
    of_model = [r for r in all_refs if r.model == model]
    if not of_model:
        models = sorted({r.model for r in all_refs})
        raise InputError(
            f"no recipe for model '{model}' under {root}",
            fix=f"known models: {', '.join(models) or 'none'}",
        )
    chosen = [r for r in of_model if filters.matches(r.parsed)]
    if len(chosen) == 1:
        return chosen[0]
    if not chosen:
        raise InputError(
            f"no recipe for '{model}' matches the options given; its recipes are:\n"
            f"{_describe(of_model, root)}",
            fix="change --precision/--topology/--seq/--variant, or give the folder path",
        )
    raise InputError(
        f"'{model}' has {len(chosen)} matching recipes:\n{_describe(chosen, root)}",
        fix="narrow it with --precision, --topology, --seq or --variant, or give the folder path",
    )


def resolve(request: str, root: Path | None, filters: Filters) -> RecipeRef:
    """Resolve ``request`` (a path or a model name)."""
    if filters.submitter is not None and filters.submitter not in SUBMITTER_FOLDERS:
        raise InputError(
            f"unknown submitter '{filters.submitter}'",
            fix=f"use one of: {', '.join(SUBMITTER_FOLDERS)}",
        )
    path = Path(request).expanduser()
    if path.exists() or "/" in request or request.endswith(".sh"):
        return resolve_path(path, filters.submitter)
    return resolve_model(request, root, filters)
