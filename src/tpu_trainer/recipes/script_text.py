"""The ``run_recipe.sh`` text equivalent to a README recipe's script, for :func:`parse_recipe`.

The pod's steps (exports, setup commands, the training program) become one ``--command``
chain; the training program's arguments go into ``MAXTEXT_ARGS`` (``MAXDIFFUSION_ARGS``), as
tpu-recipes' own scripts write them. Values the tool fills in at submission stay ``${NAME}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tpu_trainer.recipes.pod_steps import framework_of
from tpu_trainer.recipes.recipe import Framework, StepKind
from tpu_trainer.recipes.script_eval import PodStep
from tpu_trainer.recipes.script_files import program_paths
from tpu_trainer.recipes.script_words import symbolic
from tpu_trainer.recipes.shell_quote import dq_escape, quote_for_shell
from tpu_trainer.recipes.shell_words import REF_CLOSE, REF_OPEN

_REF = re.compile(f"{REF_OPEN}([^{REF_CLOSE}]*){REF_CLOSE}")
CONFIG_NAMES = ("PROJECT_ID", "CLUSTER_NAME", "ZONE", "BASE_OUTPUT_DIR", "WORKLOAD_IMAGE")
TOOL_FLAGS = {
    "--cluster": "${CLUSTER_NAME}",
    "--project": "${PROJECT_ID}",
    "--zone": "${ZONE}",
    "--workload": "${WORKLOAD_NAME}",
    "--docker-image": "${WORKLOAD_IMAGE}",
    "--base-docker-image": "${WORKLOAD_IMAGE}",
}
"""xpk flags whose value is the tool's."""


def pod_word(text: str) -> str:
    """``text`` quoted for the pod's shell; a value filled in at submission stays a reference."""
    plain = _REF.sub("x", text)
    if plain and quote_for_shell(plain) == plain:
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def in_double_quotes(text: str) -> str:
    """``text`` for the inside of a double-quoted string, references as ``${NAME}``."""
    pieces = _REF.split(text)
    return "".join(
        dq_escape(piece) if i % 2 == 0 else "${" + piece + "}" for i, piece in enumerate(pieces)
    )


def is_plain(text: str) -> bool:
    return bool(text) and quote_for_shell(_REF.sub("x", text)) == _REF.sub("x", text)


def _entry(step: PodStep) -> tuple[list[str], list[str], Framework]:
    """The program's words up to its base config, its arguments, and its framework."""
    paths, head = program_paths(step.words)
    framework = framework_of(paths[0] if paths else "") or Framework.MAXTEXT
    return list(step.words[:head]), list(step.words[head:]), framework


def pod_command(steps: Sequence[PodStep]) -> tuple[str, str, list[str]]:
    """The ``--command`` chain, the arguments variable's name and the arguments (of the last
    training program). A variable exported more than once (``export A=...`` then ``A+=...``)
    is exported once, where it gets the value it ends with."""
    last = max((i for i, s in enumerate(steps) if s.kind is StepKind.ENTRY), default=-1)
    final_export = {s.words[0]: i for i, s in enumerate(steps) if s.kind is StepKind.EXPORT}
    parts: list[str] = []
    variable, args = "MAXTEXT_ARGS", list[str]()
    for i, step in enumerate(steps):
        if step.kind is StepKind.EXPORT:
            name, value = step.words
            if final_export[name] == i:  # one export per variable: the value it ends with
                parts.append(f"export {name}={pod_word(value)}")
        elif i == last:
            head, args, framework = _entry(step)
            variable = f"{framework.value.upper()}_ARGS"
            parts.append(" ".join(pod_word(w) for w in head) + " " + symbolic(variable))
        else:
            parts.append(" ".join(pod_word(w) for w in step.words))
    return " && ".join(parts), variable, args


def generated_recipe(
    header: str,
    exports: Mapping[str, str],
    flags: Sequence[tuple[str, str | None]],
    device_type: str,
    steps: Sequence[PodStep],
) -> str:
    """The ``run_recipe.sh`` text: the tool's variables, the README's, the arguments and one
    ``xpk workload create`` with the README's flags."""
    command, variable, args = pod_command(steps)
    lines = [f"# {in_double_quotes(header)}".replace("\n", " ")]
    lines += [f'export {name}=""' for name in CONFIG_NAMES]
    lines += [
        f'export {name}="{in_double_quotes(value)}"'
        for name, value in exports.items()
        if is_plain(value)
    ]
    lines.append(f'{variable}="' + in_double_quotes(" ".join(pod_word(a) for a in args)) + '"')
    submit = ["xpk", "workload", "create"]
    for name, value in flags:
        if name == "--command":
            submit.append(f'--command="{in_double_quotes(command)}"')
        elif name in ("--tpu-type", "--device-type"):
            submit.append(f"{name}={device_type}")
        elif name in TOOL_FLAGS:
            submit.append(f'{name}="{TOOL_FLAGS[name]}"')
        elif value is None:
            submit.append(name)
        else:
            submit.append(f'{name}="{in_double_quotes(pod_word(value))}"')
    lines.append(" ".join(submit))
    return "\n".join(lines) + "\n"
