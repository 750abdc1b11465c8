"""The two generated scripts: ``setup_training_env.sh`` and ``submit_<model>.sh``.

Pure text rendering. Values the recipe wrote are carried word for word; every word is quoted so
that it survives the submitting bash and then the pod's shell unchanged.
"""

from __future__ import annotations

from tpu_trainer import __version__
from tpu_trainer.errors import InputError
from tpu_trainer.plan.naming import GCLUSTER_NAME_MAX, TIMESTAMP_FORMAT, WORKLOAD_NAME_MAX
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.submit_values import is_secret_name
from tpu_trainer.recipes.pod_steps import entry_point
from tpu_trainer.recipes.recipe import CommandStep, StepKind
from tpu_trainer.recipes.shell_quote import dq_escape, quote_for_shell
from tpu_trainer.recipes.shell_words import (
    Lit,
    Placeholder,
    Quote,
    Redir,
    Ref,
    Var,
    Word,
    render_part,
)

CONT = " \\\n"


def _dq_value(template: str) -> str:
    """A value for a double-quoted assignment: ``${NAME}`` references live, the rest literal."""
    import re

    out = []
    for piece in re.split(r"(\$\{[A-Za-z_][A-Za-z0-9_]*\})", template):
        out.append(piece if piece.startswith("${") else dq_escape(piece))
    return "".join(out)


def pod_word(word: Word) -> str:
    """``word`` as pod-shell text, escaped for the inside of the submitting bash's double quotes.

    Submit-time references (``${BASE_OUTPUT_DIR}``) stay live so the submitting shell fills them;
    pod-time ones (``${TPU_WORKER_ID}``) are escaped so the pod's shell does.
    """
    out: list[str] = []
    for part in word.parts:
        if isinstance(part, Lit):
            out.append(dq_escape(quote_for_shell(part.text) if part.text else "''"))
        elif isinstance(part, Ref) and is_secret_name(part.name):
            out.append(f'\\"\\${{{part.name}}}\\"')  # the pod's environment, never a file
        elif isinstance(part, Ref):
            out.append("${" + part.name + "}")
        elif isinstance(part, Var):
            text = dq_escape(render_part(part))
            out.append(f'\\"{text}\\"' if part.quote is Quote.DOUBLE else text)
        elif isinstance(part, Redir):
            out.append(dq_escape(part.text))
        elif isinstance(part, Placeholder):
            raise InputError(
                f"placeholder <{part.name}> left in the command",
                fix="replace it in the recipe, or pass --set for the argument",
            )
        else:
            raise InputError(
                f"command substitution `{render_part(part)}` in the command",
                fix="the tool does not carry command substitutions into a workload",
            )
    return "".join(out)


def _step_text(step: CommandStep, plan: Plan) -> str:
    if step.kind is StepKind.ENTRY:
        entry = entry_point(step.words)  # each branch of an `if` keeps its own entry point
        words = [pod_word(_literal(w)) for w in entry.lead]
        words += [f"{k}={pod_word(_literal(v))}" for k, v in entry.env]
        run = ["-m"] if not entry.module.endswith(".py") else []  # `python3 MaxText/train.py`
        words += [pod_word(_literal(entry.interpreter))]
        words += [pod_word(_literal(o)) for o in entry.options]
        words += [*run, pod_word(_literal(entry.module))]
        if entry.base_config:
            words.append(pod_word(_literal(entry.base_config)))
        words.append("${" + plan.args_variable + "}")
        words += [dq_escape(r) for r in entry.redirects]
        return " ".join(words)
    texts = []
    for word in step.words:
        name, eq, _ = word.render().partition("=")
        if eq and name == "LIBTPU_INIT_ARGS":
            texts.append("LIBTPU_INIT_ARGS='${XLA_FLAGS}'")
        else:
            texts.append(pod_word(word))
    return " ".join(texts)


def _literal(text: str) -> Word:
    return Word((Lit(text),), 0)


def pod_command(plan: Plan) -> str:
    """The ``--command`` value as written in the submit script (one step per line)."""
    steps = plan.recipe.steps
    lines = []
    for step in steps:
        sep = f" {step.separator}" if step.separator and step.separator != "\n" else ""
        if step.separator == "\n":
            sep = " ;"
        lines.append(_step_text(step, plan) + sep)
    return CONT.join(lines)


def xla_flags_body(plan: Plan) -> str:
    """Inside of the double-quoted ``XLA_FLAGS=`` assignment, one flag per line."""
    return " \\\n" + "".join(f"  {dq_escape(flag)} \\\n" for flag in plan.xla_flags) + "  "


def program_args_body(plan: Plan) -> str:
    """Inside of the double-quoted program-arguments assignment, one argument per line."""
    return "\\\n" + CONT.join(pod_word(w) for w in plan.program_args)


def _check_flags(plan: Plan) -> None:
    for flag in plan.xla_flags:
        if any(c in flag for c in "'\"\\`$") or not flag:
            raise InputError(
                f"XLA flag `{flag}` holds quotes or `$`",
                fix="write the flag without quotes in the recipe's XLA_FLAGS",
            )


def comment(text: str) -> str:
    """``text`` for a ``#`` comment line: newlines and other control characters made visible,
    so nothing after them can become a command."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def _header(plan: Plan, purpose: str) -> list[str]:
    s = plan.slice
    return [
        "#!/bin/bash",
        f"# {comment(purpose)}",
        f"# Written by tpu-trainer {__version__} from {comment(str(plan.recipe_script))}.",
        f"# Slice: {s.device_type} x{plan.num_slices}: {s.chips} chips, {s.jax_devices} JAX devices, "
        f"{s.hosts} hosts ({s.accelerator.name}).",
        "set -euo pipefail",
        "",
    ]


def _submitter(plan: Plan) -> tuple[str, str, int]:
    """The submit command, the tool's name for messages and its longest workload name."""
    if plan.recipe.submitter == "gcluster":
        return "gcluster job submit", "gcluster (Cluster Toolkit)", GCLUSTER_NAME_MAX
    return "xpk workload create", "xpk", WORKLOAD_NAME_MAX


def render_submit(plan: Plan) -> str:
    """``submit_<model>.sh``: exports, XLA flags, program arguments, ``xpk workload create``
    (``gcluster job submit`` for a Cluster Toolkit recipe)."""
    _check_flags(plan)
    command, tool, _ = _submitter(plan)
    lines = _header(plan, f"Submits {plan.model} to GKE through {tool}.")
    for var in plan.variables:
        if var.name == "WORKLOAD_NAME":
            lines += _workload_name_lines(plan)
            continue
        lines.append(f'export {var.name}="{_dq_value(var.template)}"')
    if plan.recipe.submitter != "gcluster":
        lines += [
            "",
            "# The project's number, which tpu-trainer passes to xpk (empty: xpk asks Cloud",
            "# Resource Manager for it)",
            'PROJECT_NUMBER="${PROJECT_NUMBER:-}"',
        ]
    lines.append("")
    lines.append("# XLA flags, as the recipe gives them")
    lines.append(f'XLA_FLAGS="{xla_flags_body(plan)}"')
    lines.append("")
    lines.append(
        f"# {plan.recipe.framework.value} arguments: the recipe's, in its order, then the tool's"
    )
    lines.append(f'{plan.args_variable}="{program_args_body(plan)}"')
    lines.append("")
    lines.append(f"{command} \\")
    flag_lines = []
    for name, value in plan.xpk_flags:
        if name == "--command":
            flag_lines.append(f'  --command="{pod_command(plan)}"')
        elif value is None:
            flag_lines.append(f"  {name}")
        else:
            flag_lines.append(f'  {name}="{_dq_value(value)}"')
    lines.append(CONT.join(flag_lines))
    return "\n".join(lines) + "\n"


def _workload_name_lines(plan: Plan) -> list[str]:
    date = TIMESTAMP_FORMAT.replace("%", "%")
    _, tool, limit = _submitter(plan)
    tool = tool.split()[0]
    return [
        f"# A name {tool} accepts: [a-z]([-a-z0-9]*[a-z0-9])?, at most {limit} characters.",
        f'WORKLOAD_NAME="${{WORKLOAD_NAME:-{plan.workload_prefix}-$(date +{date})}}"',
        "export WORKLOAD_NAME",
        f'if (( ${{#WORKLOAD_NAME}} > {limit} )) || [[ "${{WORKLOAD_NAME}}" == *--* ]] \\',
        '    || ! [[ "${WORKLOAD_NAME}" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]]; then',
        f'  echo "WORKLOAD_NAME=${{WORKLOAD_NAME}} is not a valid {tool} workload name:" \\',
        f'    "use lower-case letters, digits and single hyphens, at most {limit} '
        'characters, starting with a letter." >&2',
        "  exit 2",
        "fi",
    ]


def render_setup(plan: Plan) -> str:
    """``setup_training_env.sh``: cluster credentials, and the image built only if missing."""
    c = plan.config
    lines = _header(plan, "Prepares the environment and the training image.")
    values = [
        ("PROJECT_ID", plan.value_of("PROJECT_ID")),
        ("CLUSTER_NAME", plan.value_of("CLUSTER_NAME")),
        ("REGION", c.region),
        ("ZONE", plan.value_of("ZONE")),
        ("WORKLOAD_IMAGE", plan.value_of("WORKLOAD_IMAGE")),
        ("MAXTEXT_BRANCH", c.maxtext_branch or "main"),
        ("JAX_VERSION", c.jax_version or "NONE"),
        ("LIBTPU_VERSION", c.libtpu_version or "NONE"),
    ]
    lines += [f'export {k}="{dq_escape(v)}"' for k, v in values]
    lines += _SETUP_BODY.splitlines()
    return "\n".join(lines) + "\n"


_SETUP_BODY = r"""
echo "Fetching credentials for cluster ${CLUSTER_NAME} (${REGION})"
gcloud container clusters get-credentials "${CLUSTER_NAME}" \
  --region="${REGION}" --project="${PROJECT_ID}"

if docker manifest inspect "${WORKLOAD_IMAGE}" >/dev/null 2>&1; then
  echo "Image ${WORKLOAD_IMAGE} exists; skipping the build."
  exit 0
fi

echo "Building ${WORKLOAD_IMAGE} from MaxText ${MAXTEXT_BRANCH} (jax ${JAX_VERSION}, libtpu ${LIBTPU_VERSION})"
gcloud auth configure-docker "${WORKLOAD_IMAGE%%/*}" --quiet
BUILD_DIR="$(mktemp -d)"
trap 'rm -rf "${BUILD_DIR}"' EXIT
git clone --depth 1 --branch "${MAXTEXT_BRANCH}" \
  https://github.com/AI-Hypercomputer/maxtext.git "${BUILD_DIR}/maxtext"
cd "${BUILD_DIR}/maxtext"
export MAXTEXT_REPO_ROOT="${PWD}"
if [[ -f src/dependencies/scripts/docker_build_dependency_image.sh ]]; then
  DEPS_SCRIPT=src/dependencies/scripts/docker_build_dependency_image.sh
  RUNNER_FILE=src/dependencies/dockerfiles/maxtext_runner.Dockerfile
else
  DEPS_SCRIPT=docker_build_dependency_image.sh
  RUNNER_FILE=maxtext_runner.Dockerfile
fi
bash "${DEPS_SCRIPT}" MODE=stable DEVICE=tpu \
  JAX_VERSION="${JAX_VERSION}" LIBTPU_VERSION="${LIBTPU_VERSION}"
docker build --build-arg BASEIMAGE=maxtext_base_image --build-arg PACKAGE_DIR=src \
  -f "${RUNNER_FILE}" -t "${WORKLOAD_IMAGE}" .
docker push "${WORKLOAD_IMAGE}"
echo "Pushed ${WORKLOAD_IMAGE}"
"""


def expand_double_quoted(text: str, values: dict[str, str]) -> str:
    """What bash makes of ``"text"`` given ``values`` (used to show the exact submitted argv)."""
    from tpu_trainer.recipes.shell_words import tokenize

    tokens = tokenize('"' + text + '"')
    word = tokens[0]
    if not isinstance(word, Word) or len(tokens) != 1:  # pragma: no cover - quoted text is one word
        raise InputError("cannot read back a generated value", fix="report this as a bug")
    out = []
    for part in word.parts:
        if isinstance(part, Var):
            if part.name not in values:
                raise InputError(
                    f"${{{part.name}}} has no value", fix=f"pass --var {part.name}=VALUE"
                )
            out.append(values[part.name])
        elif isinstance(part, Lit):
            out.append(part.text)
        else:
            out.append(render_part(part))
    return "".join(out)


def submitted_argv(plan: Plan, project_number: str | None = None) -> list[str]:
    """The argv the submit script hands to xpk, computed the way bash would; the project's
    number (``PROJECT_NUMBER``, which the tool sets when it runs the script) stays
    ``${PROJECT_NUMBER}`` unless given."""
    values = {v.name: v.value for v in plan.variables}
    values["XLA_FLAGS"] = expand_double_quoted(xla_flags_body(plan), values)
    values[plan.args_variable] = expand_double_quoted(program_args_body(plan), values)
    command = expand_double_quoted(pod_command(plan), values)
    argv = plan.xpk_argv(command)
    if project_number is None:
        return argv
    flag = "--project-number="
    return [flag + project_number if a == flag + "${PROJECT_NUMBER}" else a for a in argv]
