"""Values the submitting shell splices into the pod's command, kept to plain words.

The submit script fills ``${NAME}`` references (configuration values, recipe variables,
``--var``) inside the double-quoted ``--command``; the pod's shell then reads the result. A
value holding ``;``, a space or a quote would therefore become shell syntax in the pod, so
every such value is checked here, naming its key. Secrets never become values at all: a
reference to one stays a reference that the pod's shell resolves from its own environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tpu_trainer.config.model import short as shown
from tpu_trainer.errors import InputError
from tpu_trainer.infra.redact import SECRET_ENV_VARS
from tpu_trainer.plan.plan_values import Finding, Level, Variable
from tpu_trainer.recipes.recipe import Recipe, StepKind
from tpu_trainer.recipes.shell_quote import SHELL_SPECIAL
from tpu_trainer.recipes.shell_words import Ref, Word

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLAIN = re.compile(r"^[A-Za-z0-9_./:=,+@%^-]*$")
_SECRET_LOOKING = re.compile(r"(?i)(TOKEN|API_?KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
PLAIN_CHARACTERS = "letters, digits and _ . / : = , + @ % ^ -"


def is_secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``WANDB_API_KEY`` and other names whose values are secrets."""
    return name in SECRET_ENV_VARS or _SECRET_LOOKING.search(name) is not None


def plain_problem(value: str) -> str:
    """Why ``value`` (``${NAME}`` references aside) is not one plain shell word; "" if it is."""
    rest = _REFERENCE.sub("", value)
    if _PLAIN.match(rest):
        return ""
    bad = sorted({c for c in rest if not _PLAIN.match(c)})
    return "holds " + " ".join(repr(c) for c in bad[:6])


def check_var_options(given: Iterable[tuple[str, str]]) -> None:
    """``--var NAME=VALUE``: a name the shell does not own, not a secret, a plain value."""
    for name, value in given:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in SHELL_SPECIAL:
            raise InputError(
                f"--var {shown(name)}: not a recipe variable name the tool can set",
                fix="name a variable the recipe uses (letters, digits, _), not a shell one",
            )
        if is_secret_name(name):
            raise InputError(
                f"--var {name}: {name} is a secret, and secrets are never written into the "
                "generated scripts",
                fix=f"drop --var {name}: the recipe's ${{{name}}} is read by the pod's shell "
                f"from the workload's environment; give the workload {name} there",
            )
        problem = plain_problem(value)
        if problem or "$(" in value:
            raise InputError(
                f"--var {name}={shown(value)}: values may not hold spaces, quotes or shell "
                f"operators ({problem or 'a command substitution'})",
                fix=f"give a plain value ({PLAIN_CHARACTERS}; paths, names, gs:// URLs)",
            )


def check_value(name: str, value: str, source: str) -> None:
    """A variable the submitting shell splices into the pod's command must stay one word."""
    problem = plain_problem(value)
    if problem:
        raise InputError(
            f"{name}={shown(value)} (from {source}) {problem}: spliced into the pod's command "
            "it would not stay one word",
            fix=f"use a value made of {PLAIN_CHARACTERS}",
        )


def references(words: Iterable[Word], texts: Iterable[str] = ()) -> list[str]:
    """Names of submit-time references in ``words`` and in ``texts`` (``${NAME}``), in order."""
    found: list[str] = []
    for word in words:
        found += [p.name for p in word.parts if isinstance(p, Ref)]
    for text in texts:
        found += _REFERENCE.findall(text)
    return list(dict.fromkeys(found))


def secret_finding(name: str) -> Finding:
    return Finding(
        "secret-" + name.lower().replace("_", "-"),
        Level.WARN,
        f"{name} is a secret: the scripts never hold its value; the pod's shell reads "
        f"${{{name}}} from the workload's environment",
        fix=f"make {name} available in the workload's environment (image or cluster secret)",
    )


def recipe_references(recipe: Recipe) -> list[str]:
    """Submit-time ``${NAME}`` references of the recipe: its command, arguments and flags."""
    words = [w for step in recipe.steps for w in step.words]
    texts = [f.value for f in recipe.xpk_flags if f.value] + [v.template for v in recipe.variables]
    return references(words, texts)


def check_variables(recipe: Recipe, out: dict[str, Variable], given: dict[str, str]) -> None:
    for var in out.values():
        secret = next((r for r in references((), [var.template]) if is_secret_name(r)), None)
        if secret is not None:
            raise InputError(
                f"{var.name} (from {var.source}) refers to the secret {secret}: the submit "
                "script would write its value into the workload's command line",
                fix=f"write ${{{secret}}} in the program arguments instead, where the pod's "
                "shell reads it from the workload's environment",
            )
        missing = next((r for r in references((), [var.template]) if r not in out), None)
        if missing is not None and var.name != "WORKLOAD_NAME":
            raise InputError(
                f"{var.name} (from {var.source}) refers to ${{{missing}}}, which nothing "
                "here sets: the tool never fills it from this machine's environment",
                fix=f"give {var.name} a value without ${{{missing}}}",
            )
        if var.name != "WORKLOAD_NAME":
            check_value(var.name, var.value, var.source)
    unused = [n for n in given if n not in out]
    if unused:
        raise InputError(
            f"--var {unused[0]}: the recipe neither sets nor uses {unused[0]}",
            fix="its variables: " + ", ".join(v.name for v in recipe.variables),
        )


def check_references(
    plan_vars: tuple[Variable, ...], recipe: Recipe, words: list[Word]
) -> list[Finding]:
    """Every submit-time reference has a value the plan gives (secrets stay the pod's)."""
    findings: list[Finding] = []
    known = {v.name for v in plan_vars}
    texts = [f.value for f in recipe.xpk_flags if f.value and f.name != "--command"]
    for flag in recipe.xpk_flags:
        secret = next((r for r in references((), [flag.value or ""]) if is_secret_name(r)), None)
        if secret is not None and flag.name != "--command":
            raise InputError(
                f"{recipe.source}:{flag.line}: {flag.name} refers to the secret {secret}: the "
                "submit script would take its value from this machine into the workload",
                fix=f"drop it from {flag.name}; write ${{{secret}}} in the program arguments, "
                "where the pod's shell reads it from the workload's environment",
            )
    steps = [w for s in recipe.steps if s.kind is not StepKind.ENTRY for w in s.words]
    for ref in references([*steps, *words], texts):
        if ref in known:
            continue
        if is_secret_name(ref):
            findings.append(secret_finding(ref))
            continue
        raise InputError(
            f"{recipe.source}: ${{{ref}}} has no value: nothing in the configuration or the "
            "recipe sets it, and the tool never fills it from this machine's environment",
            fix=f"pass --var {ref}=VALUE",
        )
    return findings
