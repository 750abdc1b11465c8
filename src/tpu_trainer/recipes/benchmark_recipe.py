"""A MaxText benchmark-runner recipe, read as the same request as a ``run_recipe.sh``.

The runner (``benchmarks/benchmark_runner.py`` at the revision the recipe pins) turns a model
name into an ``xpk workload create`` whose pod runs MaxText with the model's tuning parameters
and XLA flags. This module writes that submission as the equivalent ``run_recipe.sh`` text (from
the shipped model data, never by running the runner) and reads it with :func:`parse_recipe`, so
the plan, checks and scripts treat both kinds of recipe alike. Project, zone, cluster, output
directory and image come from the configuration, as for every recipe; the workload name is the
tool's (it is also MaxText's ``run_name``, as in the runner).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.benchmark_invocation import (
    RUNNER_SCRIPT,
    Invocation,
    OptionValue,
    find_invocation,
    pinned_revision,
    readme_device_type,
    readme_exports,
)
from tpu_trainer.recipes.benchmark_models import (
    BenchmarkModel,
    Revision,
    find_model,
    find_revision,
    first_defining,
    known_revisions,
)
from tpu_trainer.recipes.reader import parse_recipe
from tpu_trainer.recipes.recipe import Recipe, RecipeProblem
from tpu_trainer.recipes.shell_quote import dq_escape

README = "README.md"
REVISION_VARIABLE = "MAXTEXT_REVISION"
"""``--var MAXTEXT_REVISION=<rev>`` reads the recipe against another revision than its pin."""
_FILLED_BY_TOOL = frozenset(
    {"project", "zone", "cluster_name", "base_output_directory", "xpk_path", "model_name"}
)
_READ = frozenset(
    {"device_type", "num_slices", "num_steps", "priority", "max_restarts", "libtpu_version"}
    | {"libtpu_type", "base_docker_image"}
)
_XPK = "xpk"
_IMAGE_LIBTPU = "maxtext-docker"
_NIGHTLY_LIBTPU = "nightly-libtpu"


@dataclass(frozen=True, slots=True)
class _Context:
    source: str
    readme: str
    readme_name: str


def _readme_for(script: Path) -> tuple[str, str]:
    """The README that goes with a script: itself, or the nearest one above it (two levels)."""
    if script.name == README:
        return script.read_text(encoding="utf-8"), str(script)
    for folder in (script.parent, script.parent.parent):
        candidate = folder / README
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8", errors="replace"), str(candidate)
    return "", ""


def _revision(ctx: _Context, variables: Mapping[str, str]) -> Revision:
    pin = variables.get(REVISION_VARIABLE) or pinned_revision(ctx.readme)
    if pin is None:
        where = ctx.readme_name or "no README beside it"
        raise RecipeError(
            f"{ctx.source}: which MaxText revision runs this recipe? ({where} pins none)",
            fix=f"pass --var {REVISION_VARIABLE}=<rev>; the tool knows {known_revisions()}",
        )
    revision = find_revision(pin)
    if revision is None:
        raise RecipeError(
            f"{ctx.source}: the recipe pins MaxText {pin}, whose benchmark models the tool "
            "does not ship",
            fix=f"pass --var {REVISION_VARIABLE}=<rev> with one of {known_revisions()}, or add "
            "the revision with tools/build_benchmark_models.py",
        )
    return revision


def _check_options(call: Invocation, revision: Revision) -> None:
    for name, value in call.options.items():
        if name not in revision.options:
            raise RecipeError(
                f"{call.source}:{value.line}: benchmark_runner at MaxText {revision.short} "
                f"has no --{name}",
                fix="remove it, or pin the MaxText revision that has it",
            )
        if name not in _FILLED_BY_TOOL | _READ:
            raise RecipeError(
                f"{call.source}:{value.line}: --{name} is a benchmark_runner option the tool "
                "does not plan (Pathways, storage and on-device runs are not supported)",
                fix=f"remove --{name} to plan a plain xpk run",
            )


def _subcommand_problems(call: Invocation, revision: Revision) -> list[RecipeProblem]:
    """A missing (or surplus) ``xpk`` subcommand: the runner would stop on the command line
    (argparse: unrecognized arguments); the plan is what the command with it right submits."""
    if call.subcommand == revision.subcommand:
        return []
    if call.subcommand not in ("", _XPK):
        raise RecipeError(
            f"{call.source}:{call.line}: benchmark_runner `{call.subcommand}` is not planned "
            "(on-device and Pathways runs are not supported)",
            fix=f"run the `{_XPK}` runner",
        )
    runner = f"benchmark_runner at MaxText {revision.short}"
    if revision.subcommand:
        message = (
            f"the command gives no subcommand; {runner} takes `{revision.subcommand}` before "
            "its options, so as written it stops with `unrecognized arguments`"
        )
        fix = f"write `{RUNNER_SCRIPT} {revision.subcommand} --project=...` in the recipe"
    else:
        message = (
            f"the command gives `{call.subcommand}`; {runner} takes no subcommand, so as "
            "written it stops with `unrecognized arguments`"
        )
        fix = f"remove `{call.subcommand}` after the runner in the recipe"
    return [
        RecipeProblem(
            "recipe-runner-subcommand",
            message + "; planned as the corrected command would submit it",
            fix + " (or pass --skip-check recipe-runner-subcommand to run the plan as it is)",
            call.line,
        )
    ]


def _planned_revision(
    pinned: Revision, name: OptionValue, explicit: bool
) -> tuple[Revision, list[RecipeProblem]]:
    """The revision to plan at: the pinned one, or, when its runner does not know the model,
    the first shipped revision that does (reported: as written the runner refuses the name).
    A revision given with ``--var MAXTEXT_REVISION`` is taken as it is."""
    if explicit or name.text in pinned.models:
        return pinned, []
    chosen = first_defining(name.text, pinned)
    if chosen is None:
        return pinned, []  # find_model says which names exist
    problem = RecipeProblem(
        "recipe-maxtext-revision",
        f"the recipe pins MaxText {pinned.short} ({pinned.date}), whose benchmark runner has "
        f"no model '{name.text}' and refuses the command; planned at {chosen.short} "
        f"({chosen.date}), the first revision that defines it",
        f"pin that revision in the recipe's README (`git checkout {chosen.commit[:9]}`), or "
        f"pass --var {REVISION_VARIABLE}={chosen.short}",
        name.line,
    )
    return chosen, [problem]


def _option(call: Invocation, name: str, default: object) -> str:
    value = call.options.get(name)
    return value.text if value is not None else str(default if default is not None else "")


def _device_type(call: Invocation, ctx: _Context) -> str:
    value: OptionValue | None = call.options.get("device_type")
    if value is None:
        raise RecipeError(f"{call.source}:{call.line}: no --device_type", fix="add --device_type")
    if value.reference is None:
        return value.text
    exported = readme_exports(ctx.readme).get(value.reference) or readme_device_type(ctx.readme)
    if exported is None:
        raise RecipeError(
            f"{call.source}:{value.line}: --device_type is ${{{value.reference}}} and the "
            "README sets no value for it",
            fix="write the device type (v6e-256, v5p-1024) in the command",
        )
    return exported


def _integer(call: Invocation, name: str, text: str) -> str:
    if not text.isdigit():
        line = call.options[name].line if name in call.options else call.line
        raise RecipeError(
            f"{call.source}:{line}: --{name} must be a whole number, not `{text}`",
            fix=f"write --{name}=N",
        )
    return text


def _args(model: BenchmarkModel, revision: Revision, steps: str) -> list[str]:
    fill = {
        "{steps}": steps,
        "{model_type}": model.model_type,
        "{base_output_directory}": "${BASE_OUTPUT_DIR}",
        "{run_name}": "${WORKLOAD_NAME}",
    }
    out: list[str] = []
    for template in revision.pod_command.args:
        if template == "{tuning_params}":
            out += [f"{k}={dq_escape(v)}" for k, v in model.tuning_params]
            continue
        arg = template
        for key, value in fill.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


def _pod_command(revision: Revision, call: Invocation, defaults_libtpu: tuple[str, str]) -> str:
    libtpu_type, libtpu_version = defaults_libtpu
    steps: list[str] = []
    if libtpu_type == _NIGHTLY_LIBTPU and revision.pod_command.libtpu_install:
        steps.append(
            revision.pod_command.libtpu_install.replace("{libtpu_version}", libtpu_version)
        )
    elif libtpu_type not in (_IMAGE_LIBTPU, _NIGHTLY_LIBTPU, revision.defaults.libtpu_type):
        raise RecipeError(
            f"{call.source}:{call.line}: --libtpu_type={libtpu_type} is not planned",
            fix=f"use the image's libtpu (--libtpu_type={_IMAGE_LIBTPU})",
        )
    for name, value in revision.pod_command.env:
        shown = "'${XLA_FLAGS}'" if value == "{xla_flags}" else value
        steps.append(f"export {name}={shown}")
    steps.append(" ".join(revision.pod_command.entry) + " ${MAXTEXT_ARGS}")
    return " && ".join(steps)


def benchmark_recipe(script: Path, text: str, variables: Mapping[str, str] | None = None) -> Recipe:
    """Read a benchmark-runner recipe (a script, or a README with the command) at ``script``."""
    readme, readme_name = _readme_for(script)
    ctx = _Context(str(script), readme, readme_name)
    call = find_invocation(text, ctx.source, markdown=script.suffix.lower() == ".md")
    given = variables or {}
    name_value = call.options.get("model_name")
    if name_value is None:
        raise RecipeError(f"{ctx.source}:{call.line}: no --model_name", fix="add --model_name")
    revision, problems = _planned_revision(
        _revision(ctx, given), name_value, bool(given.get(REVISION_VARIABLE))
    )
    problems += _subcommand_problems(call, revision)
    _check_options(call, revision)
    model = find_model(
        revision, name_value.text, f"{ctx.source}:{name_value.line}", call.subcommand
    )
    d = revision.defaults
    steps = _integer(call, "num_steps", _option(call, "num_steps", d.num_steps))
    slices = _integer(call, "num_slices", _option(call, "num_slices", d.num_slices))
    restarts = _option(call, "max_restarts", d.max_restarts)
    libtpu = (
        _option(call, "libtpu_type", d.libtpu_type),
        _option(call, "libtpu_version", d.libtpu_version),
    )
    flags = [
        f"--device-type={_device_type(call, ctx)}",
        f"--num-slices={slices}",
        f"--priority={_option(call, 'priority', d.priority)}",
        *([f"--max-restarts={_integer(call, 'max_restarts', restarts)}"] if restarts else []),
    ]
    lines = [
        f"# {ctx.source}: benchmark_runner --model_name={model.name} at MaxText {revision.short}",
        *(f'export {n}=""' for n in ("PROJECT_ID", "CLUSTER_NAME", "ZONE", "BASE_OUTPUT_DIR")),
        'export WORKLOAD_IMAGE=""',
        f'export {REVISION_VARIABLE}="{revision.key}"',
        f'export WORKLOAD_NAME="$(printf %s {model.name})"',
        f'XLA_FLAGS="{dq_escape(model.xla_flags)}"',
        'MAXTEXT_ARGS="' + " ".join(_args(model, revision, steps)) + '"',
        "xpk workload create --cluster=${CLUSTER_NAME} --project=${PROJECT_ID} --zone=${ZONE} "
        + " ".join(flags)
        + ' --base-docker-image="${WORKLOAD_IMAGE}" --enable-debug-logs'
        + ' --workload="${WORKLOAD_NAME}"'
        + f' --command="{_pod_command(revision, call, libtpu)}"',
    ]
    recipe = parse_recipe("\n".join(lines) + "\n", ctx.source)
    # every value comes from the runner command: point at it, not at the lines written here
    return replace(
        recipe,
        variables=tuple(replace(v, line=call.line) for v in recipe.variables),
        xpk_flags=tuple(replace(f, line=call.line) for f in recipe.xpk_flags),
        problems=tuple(problems),
    )
