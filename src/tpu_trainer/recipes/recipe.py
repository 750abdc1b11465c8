"""The recipe model: what a tpu-recipes ``run_recipe.sh`` says, as :mod:`reader` reads it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.catalog.accelerators import ACCELERATORS
from tpu_trainer.errors import RecipeError
from tpu_trainer.recipes.shell_words import Word


class Framework(StrEnum):
    MAXTEXT = "maxtext"
    MAXDIFFUSION = "maxdiffusion"


@dataclass(frozen=True, slots=True)
class RecipeVariable:
    """An exported variable of the recipe, in the order the script sets it."""

    name: str
    template: str
    """Its value as written, references kept as ``${NAME}``; empty when the user must fill it."""
    line: int
    computed: bool = False
    """Set by a command substitution (``WORKLOAD_NAME``): the tool computes its own value."""

    @property
    def must_fill(self) -> bool:
        return self.template == "" and not self.computed


@dataclass(frozen=True, slots=True)
class XpkFlag:
    name: str
    """With its dashes: ``--device-type``."""
    value: str | None
    """Value as written (references as ``${NAME}``), None for a switch."""
    line: int


class StepKind(StrEnum):
    SHELL_OPTION = "shell-option"
    EXPORT = "export"
    SETUP = "setup"
    ECHO = "echo"
    ENTRY = "entry"
    TEE = "tee"
    UPLOAD = "upload"


@dataclass(frozen=True, slots=True)
class CommandStep:
    """One simple command of the pod's command chain."""

    kind: StepKind
    words: tuple[Word, ...]
    separator: str
    """Operator after the step: ``&&``, ``|``, ``;`` or "" for the last one."""

    def text(self) -> str:
        return " ".join(w.render() for w in self.words)


@dataclass(frozen=True, slots=True)
class EntryPoint:
    env: tuple[tuple[str, str], ...]
    """``NAME=value`` prefixes of the command (``HF_HUB_CACHE=/dev/shm``)."""
    interpreter: str
    module: str
    base_config: str | None
    args: tuple[Word, ...]
    options: tuple[str, ...] = ()
    """The interpreter's own options before ``-m`` (``-u`` in ``python3 -u -m ...``)."""
    lead: tuple[str, ...] = ()
    """Words before the program that are not environment: the shell keyword of the branch it
    runs in (``then``, ``else``)."""
    redirects: tuple[str, ...] = ()
    """Its redirections (``2>&1``), after the arguments."""


@dataclass(frozen=True, slots=True)
class Placeholding:
    """A ``<placeholder>`` the recipe's author left in an argument."""

    name: str
    arg: str
    line: int


@dataclass(frozen=True, slots=True)
class RecipeProblem:
    """Something in the recipe that would stop it as written, though what it asks for can be
    planned (a benchmark-runner command its pinned MaxText refuses): reported by the checks as a
    failure named ``name``, with the fix. With ``passed``, a finding that says how the recipe
    was read (the MaxText revision it runs, and why) and stops nothing."""

    name: str
    message: str
    fix: str
    line: int
    passed: bool = False


@dataclass(frozen=True, slots=True)
class Recipe:
    """Everything a ``run_recipe.sh`` says, in its own order."""

    source: str
    variables: tuple[RecipeVariable, ...]
    xla_flags: tuple[str, ...]
    entry: EntryPoint
    xpk_flags: tuple[XpkFlag, ...]
    steps: tuple[CommandStep, ...]
    framework: Framework
    args_variable: str
    """Name of the variable that held the program arguments (``MAXTEXT_ARGS``)."""
    placeholders: tuple[Placeholding, ...]
    shell_options: tuple[str, ...]
    submitter: str = "xpk"
    """The tool the script submits with: ``xpk`` (``xpk workload create``) or ``gcluster``
    (``gcluster job submit``); ``xpk_flags`` holds that tool's flags."""
    dry_run: tuple[str, ...] = ()
    """The script's own dry-run arguments it hands the submitter (``--dry-run``,
    ``--dry-run-out FILE``); empty when it takes none."""
    problems: tuple[RecipeProblem, ...] = ()
    """What would stop the recipe as written; the plan reports each as a failed check."""

    @property
    def program_args(self) -> tuple[str, ...]:
        """Program arguments as the program receives them, ``key=value``, in recipe order."""
        return tuple(w.render() for w in self.entry.args)

    def xpk_flag(self, name: str) -> str | None:
        for flag in self.xpk_flags:
            if flag.name == name:
                return flag.value
        return None

    def has_xpk_flag(self, name: str) -> bool:
        return any(f.name == name for f in self.xpk_flags)

    @property
    def device_type(self) -> str:
        value = self.xpk_flag("--device-type") or self.xpk_flag("--tpu-type")
        compute = self.xpk_flag("--compute-type")
        if value is None and compute is not None:
            value = gcluster_device_type(compute, self.xpk_flag("--topology"))
        if value is None:  # the reader refuses recipes without one
            raise RecipeError(f"{self.source}: no --device-type", fix="add --device-type")
        return value

    @property
    def num_slices(self) -> int:
        value = self.xpk_flag("--num-slices")
        return int(value) if value and value.isdigit() else 1

    def variable(self, name: str) -> RecipeVariable | None:
        return next((v for v in self.variables if v.name == name), None)

    def arg_value(self, key: str) -> str | None:
        """Last value given to ``key`` among the program arguments."""
        found = None
        for arg in self.program_args:
            k, sep, v = arg.partition("=")
            if sep and k == key:
                found = v
        return found


def gcluster_device_type(compute: str, topology: str | None) -> str:
    """The device type gcluster's ``--compute-type`` and ``--topology`` ask for: ``tpu7x`` and
    ``4x4x4``, or the host machine type ``ct6e-standard-4t`` and ``4x4`` (``v6e-4x4``); a
    compute type with its size (``v6e-16``) stands alone."""
    for acc in ACCELERATORS.values():
        machines = (acc.machine_type, acc.machine_type_single_chip, *acc.other_machine_types)
        if compute in machines:
            compute = acc.xpk_prefix
    if topology and "-" not in compute:
        return f"{compute}-{topology}"
    return compute
