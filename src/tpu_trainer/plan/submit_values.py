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
from tpu_trainer.plan.shell_words import SHELL_SPECIAL, Ref, Word

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
