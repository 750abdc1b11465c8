"""The plan: everything the tool would do for one recipe, computed without side effects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from tpu_trainer.catalog.accelerators import Family, Precision
from tpu_trainer.config.model import Config, Source
from tpu_trainer.errors import InputError
from tpu_trainer.plan.arg_options import CheckOptions, unset_words
from tpu_trainer.plan.naming import (
    GCLUSTER_NAME_MAX,
    LOCAL_QUEUE,
    WORKLOAD_NAME_MAX,
    local_queue_problem,
    submit_script_name,
    workload_name,
    workload_prefix,
)
from tpu_trainer.plan.plan_values import Finding, Level, Variable
from tpu_trainer.plan.slices import Slice
from tpu_trainer.plan.submit_flags import submit_flags
from tpu_trainer.plan.submit_values import (
    check_references,
    check_var_options,
    check_variables,
    is_secret_name,
    recipe_references,
)
from tpu_trainer.recipes.folder import RecipeFolder
from tpu_trainer.recipes.recipe import Framework, Recipe
from tpu_trainer.recipes.shell_words import Lit, Placeholder, Ref, Word

__all__ = [
    "ArgChange",
    "CheckOptions",
    "Finding",
    "Level",
    "Plan",
    "PlanOptions",
    "ProfilerSettings",
    "Variable",
    "build_plan",
]

SETUP_SCRIPT = "setup_training_env.sh"

# Recipe variables the configuration fills, and from which key.
CONFIG_VARIABLES: dict[str, str] = {
    "PROJECT_ID": "project_id",
    "CLUSTER_NAME": "cluster_name",
    "ZONE": "default_zone",
    "BASE_OUTPUT_DIR": "base_output_dir",
    "WORKLOAD_IMAGE": "workload_image",
}
# Placeholders the tool knows how to fill: argument key -> variable.
PLACEHOLDER_VARIABLES: dict[str, str] = {
    "base_output_directory": "BASE_OUTPUT_DIR",
    "output_dir": "BASE_OUTPUT_DIR",
    "run_name": "WORKLOAD_NAME",
}


@dataclass(frozen=True, slots=True)
class ProfilerSettings:
    """MaxText's profiler arguments the tool adds (seed defaults: xplane, 3 steps after 5)."""

    profiler: str = "xplane"
    steps: int = 3
    skip_first: int = 5

    def args(self) -> tuple[tuple[str, str], ...]:
        return (
            ("profiler", self.profiler),
            ("profiler_steps", str(self.steps)),
            ("skip_first_n_steps_for_profiler", str(self.skip_first)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOptions:
    user: str
    now: datetime
    profiler: ProfilerSettings | None = field(default_factory=ProfilerSettings)
    overrides: tuple[tuple[str, str], ...] = ()
    """Program arguments to set (replaced where the recipe has them, else appended)."""
    variables: tuple[tuple[str, str], ...] = ()
    """Values for recipe variables the configuration does not cover (``--var NAME=VALUE``)."""
    priority: str | None = None
    num_slices: int | None = None
    zone: str | None = None
    unset: tuple[str, ...] = ()
    """Recipe arguments to drop (``--unset KEY``)."""
    checks: CheckOptions = field(default_factory=CheckOptions)
    workload_name: str | None = None
    """The name a run carried on already has (MaxText's ``run_name``); else made from the
    user, the model and ``now``."""


@dataclass(frozen=True, slots=True)
class ArgChange:
    key: str
    before: str | None
    after: str
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    model: str
    recipe_script: Path
    output_folder: Path
    model_dir: Path
    folder: RecipeFolder | None
    recipe: Recipe
    slice: Slice
    num_slices: int
    precision: Precision
    config: Config
    workload_name: str
    workload_prefix: str
    variables: tuple[Variable, ...]
    xla_flags: tuple[str, ...]
    program_args: tuple[Word, ...]
    arg_changes: tuple[ArgChange, ...]
    xpk_flags: tuple[tuple[str, str | None], ...]
    """Flags of the submit script's ``xpk workload create``, values as the script writes them."""
    findings: tuple[Finding, ...]
    checks: CheckOptions = field(default_factory=CheckOptions)
    local_queue: str = LOCAL_QUEUE
    """The Kueue LocalQueue the workload goes to: a gcluster recipe's ``--queue``, else xpk's
    ``multislice-queue``. The tool makes, checks and repairs this one."""

    @property
    def args_variable(self) -> str:
        return self.recipe.args_variable

    @property
    def program_arg_texts(self) -> tuple[str, ...]:
        return tuple(w.render() for w in self.program_args)

    @property
    def files(self) -> tuple[Path, ...]:
        return (
            self.output_folder / SETUP_SCRIPT,
            self.output_folder / submit_script_name(self.model),
        )

    def value_of(self, name: str) -> str:
        return next((v.value for v in self.variables if v.name == name), "")

    def expand(self, text: str) -> str:
        """Replace ``${NAME}`` references to submit-time variables with their values."""
        known = {v.name: v.value for v in self.variables}
        return re.sub(
            r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: known.get(m.group(1), m.group(0)), text
        )

    def with_zone(self, zone: str) -> Plan:
        """This plan for ``zone`` (where the capacity was found): ``ZONE`` and the values that
        reference it, as planning with ``--zone`` gives them (pure; ``--var ZONE`` still wins)."""
        known: dict[str, str] = {}
        changed: set[str] = set()
        out: list[Variable] = []
        for old in self.variables:
            var = old
            if old.name == "ZONE" and old.source != "--var":
                var = Variable("ZONE", zone, zone, "--zone")
            elif any(f"${{{name}}}" in old.template for name in changed):
                value = re.sub(
                    r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                    lambda m: known.get(m.group(1), m.group(0)),
                    old.template,
                )
                var = replace(old, value=value)
            if var is not old:
                changed.add(var.name)
            known[var.name] = var.value
            out.append(var)
        return replace(self, variables=tuple(out))

    def xpk_argv(self, command: str) -> list[str]:
        """The ``xpk workload create`` (or ``gcluster job submit``) argv the submit script runs,
        values expanded."""
        gcluster = self.recipe.submitter == "gcluster"
        argv = ["gcluster", "job", "submit"] if gcluster else ["xpk", "workload", "create"]
        for name, value in self.xpk_flags:
            if name == "--command":
                argv.append(f"--command={command}")
            elif value is None:
                argv.append(name)
            else:
                argv.append(f"{name}={self.expand(value)}")
        return argv


# ---------------------------------------------------------------------------------------------
def _precision(folder: RecipeFolder | None, recipe: Recipe) -> Precision:
    if folder is not None:
        return folder.precision
    quant = (recipe.arg_value("quantization") or "").lower()
    return Precision.FP8 if "fp8" in quant else Precision.BF16


def _variables(
    recipe: Recipe, config: Config, opts: PlanOptions, name: str, findings: list[Finding]
) -> tuple[Variable, ...]:
    check_var_options(opts.variables)
    given = dict(opts.variables)
    out: dict[str, Variable] = {
        ref: Variable(ref, given[ref], given[ref], "--var")
        for ref in recipe_references(recipe)
        if ref in given and recipe.variable(ref) is None and ref not in CONFIG_VARIABLES
    }

    def value_of(template: str) -> str:
        return re.sub(
            r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
            lambda m: out[m.group(1)].value if m.group(1) in out else m.group(0),
            template,
        )

    for var, key in CONFIG_VARIABLES.items():
        recipe_var = recipe.variable(var)
        if recipe_var is not None and recipe_var.template and var in ("BASE_OUTPUT_DIR",):
            out[var] = Variable(
                var, recipe_var.template, recipe_var.template, f"recipe line {recipe_var.line}"
            )
            findings.append(
                Finding(
                    "recipe-sets-" + var.lower().replace("_", "-"),
                    Level.WARN,
                    f"the recipe sets {var}={recipe_var.template}; "
                    f"the configured {key} is not used for it",
                )
            )
            continue
        value = given.get(var) or (opts.zone if var == "ZONE" and opts.zone else None)
        source = "--var" if var in given else ("--zone" if var == "ZONE" and opts.zone else "")
        if value is None:
            value = str(getattr(config, key) or "")
            src: Source | None = config.sources.get(key)
            source = f"config {key} ({src})" if src else f"config {key} (not set)"
        out[var] = Variable(var, value, value, source)
    out["WORKLOAD_NAME"] = Variable("WORKLOAD_NAME", name, name, "tpu-trainer (user, model, time)")
    for rv in recipe.variables:
        if rv.name in out:
            continue
        if is_secret_name(rv.name):
            continue  # read by the pod's shell from its environment: see _check_references
        if rv.name in given:
            out[rv.name] = Variable(rv.name, given[rv.name], value_of(given[rv.name]), "--var")
        elif rv.must_fill and rv.name == "ARTIFACT_DIR":
            template = "${BASE_OUTPUT_DIR}/${WORKLOAD_NAME}"
            out[rv.name] = Variable(rv.name, template, value_of(template), "tpu-trainer default")
        elif rv.must_fill:
            raise InputError(
                f"{recipe.source}:{rv.line}: the recipe needs {rv.name}, and nothing gives it a value",
                fix=f"pass --var {rv.name}=VALUE",
            )
        else:
            out[rv.name] = Variable(
                rv.name, rv.template, value_of(rv.template), f"recipe line {rv.line}"
            )
    check_variables(recipe, out, given)
    return tuple(out.values())


def _arg_word(text: str) -> Word:
    """A program argument written by the tool, as one literal word (refs kept symbolic)."""
    parts: list[Lit | Ref] = []
    for piece in re.split(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})", text):
        if piece.startswith("${"):
            parts.append(Ref(piece[2:-1]))
        elif piece:
            parts.append(Lit(piece))
    return Word(tuple(parts), 0)


def _program_args(
    recipe: Recipe, opts: PlanOptions, findings: list[Finding]
) -> tuple[tuple[Word, ...], tuple[ArgChange, ...]]:
    words = list(recipe.entry.args)
    changes: list[ArgChange] = []
    wanted: list[tuple[str, str, str]] = []
    if opts.profiler is not None and recipe.framework is Framework.MAXTEXT:
        wanted += [(k, v, "profiler") for k, v in opts.profiler.args()]
    wanted += [(k, v, "--set") for k, v in opts.overrides]
    for i, word in enumerate(words):
        holders = [p for p in word.parts if isinstance(p, Placeholder)]
        if not holders:
            continue
        key = word.render().partition("=")[0]
        var = PLACEHOLDER_VARIABLES.get(key)
        if var is None:
            line = next((p.line for p in recipe.placeholders if p.arg == word.render()), 0)
            raise InputError(
                f"{recipe.source}:{line}: `{word.render()}` holds a placeholder the tool cannot fill",
                fix=f"pass --set {key}=VALUE",
            )
        words[i] = _arg_word(f"{key}=${{{var}}}")
        changes.append(ArgChange(key, word.render(), words[i].render(), "placeholder filled"))
        findings.append(
            Finding(
                "recipe-placeholder",
                Level.WARN,
                f"`{word.render()}` in the recipe is a placeholder; using {key}=${{{var}}}",
            )
        )
    for key, value, why in wanted:
        text = f"{key}={value}"
        index = next(
            (
                i
                for i in range(len(words) - 1, -1, -1)
                if words[i].render().partition("=")[0] == key
            ),
            None,
        )
        if index is None:
            words.append(_arg_word(text))
            changes.append(ArgChange(key, None, value, why))
        elif words[index].render() != text:
            before = words[index].render().partition("=")[2]
            words[index] = _arg_word(text)
            changes.append(ArgChange(key, before, value, why))
    words, removed = unset_words(words, opts.unset, recipe.framework.value)
    changes += [ArgChange(key, before, "", "--unset") for key, before in removed]
    return tuple(words), tuple(changes)


def _folder_findings(folder: RecipeFolder | None, recipe_slice: Slice) -> list[Finding]:
    findings: list[Finding] = []
    if folder is None:
        findings.append(
            Finding(
                "recipe-folder-name",
                Level.WARN,
                "the folder name does not follow <seq>-<precision>-<family>-<topology>; "
                "precision and topology come from the script alone",
            )
        )
        return findings
    folder_slice = Slice.parse(folder.device_type)
    if folder_slice != recipe_slice:
        findings.append(
            Finding(
                "recipe-topology",
                Level.FAIL,
                f"the folder says {folder_slice.device_type} ({folder_slice.chips} chips) but the script "
                f"asks xpk for {recipe_slice.device_type} ({recipe_slice.chips} chips)",
                fix="in tpu7x-N, N counts TensorCores (2 per chip): use the topology form "
                f"--device-type={folder_slice.device_type}",
            )
        )
    else:
        findings.append(
            Finding(
                "recipe-topology",
                Level.PASS,
                f"folder and script agree on {recipe_slice.device_type}",
            )
        )
    return findings


def _local_queue(recipe: Recipe, variables: tuple[Variable, ...]) -> str:
    """The LocalQueue a gcluster recipe's ``--queue`` names (references filled in), else xpk's
    ``multislice-queue``; a name Kubernetes would refuse is an error here, before anything."""
    written = recipe.xpk_flag("--queue") if recipe.submitter == "gcluster" else None
    if not written:
        return LOCAL_QUEUE
    known = {v.name: v.value for v in variables}
    name = re.sub(
        r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: known.get(m.group(1), m.group(0)), written
    )
    problem = local_queue_problem(name)
    if problem is not None:
        line = next((f.line for f in recipe.xpk_flags if f.name == "--queue"), 0)
        raise InputError(
            f"{recipe.source}:{line}: --queue {name!r} cannot name a Kueue LocalQueue ({problem})",
            fix="write a Kubernetes object name in the recipe's --queue",
        )
    return name


def build_plan(
    *,
    model: str,
    recipe_script: Path,
    output_folder: Path,
    model_dir: Path,
    folder: RecipeFolder | None,
    recipe: Recipe,
    config: Config,
    opts: PlanOptions,
) -> Plan:
    """Compute the plan for ``recipe`` (pure: no files, no network)."""
    findings: list[Finding] = []
    slice_ = Slice.parse(recipe.device_type)
    if slice_.alternatives:
        findings.append(
            Finding(
                "device-type-form",
                Level.WARN,
                f"{recipe.device_type} is read as {slice_.device_type}; it could also mean "
                f"{', '.join(slice_.alternatives[:4])}",
                fix=f"write --device-type={slice_.device_type}",
            )
        )
    findings += _folder_findings(folder, slice_)
    findings += [
        Finding(
            p.name,
            Level.PASS if p.passed else Level.FAIL,
            f"{recipe.source}:{p.line}: {p.message}",
            p.fix,
        )
        for p in recipe.problems
    ]
    num_slices = opts.num_slices or recipe.num_slices
    limit = GCLUSTER_NAME_MAX if recipe.submitter == "gcluster" else WORKLOAD_NAME_MAX
    name = opts.workload_name or workload_name(opts.user, model, opts.now, limit)
    variables = _variables(recipe, config, opts, name, findings)
    words, changes = _program_args(recipe, opts, findings)
    findings += check_references(variables, recipe, list(words))
    cloud_keys = ("project_id", "cluster_name", "default_zone", "base_output_dir", "workload_image")
    for key in () if slice_.family is Family.CPU else cloud_keys:
        if not getattr(config, key):
            findings.append(
                Finding(
                    "config-" + key.replace("_", "-"),
                    Level.WARN,
                    f"{key} is not configured",
                    fix="run `tpu-trainer config init`",
                )
            )
    queue = _local_queue(recipe, variables)
    return Plan(
        local_queue=queue,
        model=model,
        recipe_script=recipe_script,
        output_folder=output_folder,
        model_dir=model_dir,
        folder=folder,
        recipe=recipe,
        slice=slice_,
        num_slices=num_slices,
        precision=_precision(folder, recipe),
        config=config,
        workload_name=name,
        workload_prefix=workload_prefix(opts.user, model, limit),
        variables=variables,
        xla_flags=recipe.xla_flags,
        program_args=words,
        arg_changes=changes,
        xpk_flags=submit_flags(recipe, slice_, num_slices, opts.priority),
        findings=tuple(findings),
        checks=opts.checks,
    )
