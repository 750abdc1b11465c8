"""MaxText configuration: the command's keys, value types and model keys, judged the way MaxText
0.2.5's ``pyconfig`` will judge them when the job starts.

The fast check reads only ``base.yml`` and the model file; ``data/pyconfig_keys.yaml`` (in
frameworks/maxtext) holds what those files do not say (names MaxText accepts beyond base.yml, fields that take null, renamed keys). The
runtime check that asks MaxText itself is in ``checks/pyconfig_runtime.py``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from tpu_trainer.checks import pyconfig_names as names
from tpu_trainer.checks.pyconfig_names import NAME, check_keys, name_index
from tpu_trainer.config.model import short
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs, parse_value
from tpu_trainer.frameworks.maxtext.pyconfig_keys import pyconfig_keys
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.runtime.manager import MAXTEXT

RUNTIME_NAME = "maxtext-config (MaxText pyconfig)"

# ---- MaxText 0.2.5 facts (data/pyconfig_keys.yaml) ---------------------------------------
DERIVED, ACCEPTED_BEYOND_BASE = names.DERIVED, names.ACCEPTED_BEYOND_BASE
NESTED, RENAMES = names.NESTED, names.RENAMES
_KEYS = pyconfig_keys()
NULLABLE = _KEYS.nullable
UNTYPED = _KEYS.untyped
FLOAT_DESPITE_INT_DEFAULT = _KEYS.float_despite_int_default
LIST_ALLOWED = _KEYS.list_allowed
STRING_TO_LIST = _KEYS.string_to_list
MODELS_WITHOUT_FILE = _KEYS.models_without_file
MODELS_INSTRUCT = _KEYS.models_instruct
MODELS_REJECTED = _KEYS.models_rejected

# ---- values as MaxText reads them -----------------------------------------------------------
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?")
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_WORDS: Mapping[str, Any] = {
    **dict.fromkeys(("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"), True),
    **dict.fromkeys(("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"), False),
    **dict.fromkeys(("null", "Null", "NULL", "~"), None),
}
_BOOL_TEXT = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


def cli_value(text: str) -> Any:
    """``key=text`` typed as OmegaConf's ``from_cli`` types it (empty → null, ``1e-5`` → float)."""
    if text == "":
        return None
    if text in _WORDS:
        return _WORDS[text]
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _PLAIN.fullmatch(text):
        return text
    value = parse_value(text)
    if isinstance(value, date):
        return text
    if isinstance(value, str) and _FLOAT.fullmatch(value):
        return float(value)
    return value


def maxtext_input(value: Any) -> Any:
    """What pydantic receives: MaxText turns the string ``none`` (any case) into null."""
    return None if isinstance(value, str) and value.lower() == "none" else value


def _kind(default: Any) -> str:
    if default is None or (isinstance(default, str) and default.lower() == "none"):
        return ""
    for kind, types in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if isinstance(default, types):
            return kind
    if isinstance(default, list):
        return "list"
    return "dict" if isinstance(default, dict) else ""


_WORD = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}
_WORD |= {"list": "list", "dict": "dictionary"}


def expected_kind(key: str, default: Any) -> str:
    """bool, int, float, str, list, dict, or "" (no check) for ``key``."""
    if key in UNTYPED:
        return ""
    return "float" if key in FLOAT_DESPITE_INT_DEFAULT else _kind(default)


def type_problem(key: str, value: Any, default: Any) -> str | None:
    """Pydantic's complaint about ``value`` for ``key`` (whose base.yml default is ``default``)."""
    kind = expected_kind(key, default)
    if not kind or (key in LIST_ALLOWED and isinstance(value, list)):
        return None
    plain = f"Input should be a valid {_WORD[kind]}"
    if value is None:
        return None if key in NULLABLE else plain
    if kind == "bool":
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
            return None
        if isinstance(value, str) and value.lower() in _BOOL_TEXT:
            return None
        return plain if isinstance(value, (list, dict)) else plain + ", unable to interpret input"
    if kind in ("int", "float"):
        return _number_problem(kind, value, plain)
    if kind == "str":
        return None if isinstance(value, str) else plain
    if kind == "list":
        to_list = isinstance(value, str) and key in STRING_TO_LIST
        return None if isinstance(value, list) or to_list else plain
    return None if isinstance(value, dict) else plain


def _number_problem(kind: str, value: Any, plain: str) -> str | None:
    if isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        if kind == "float" or value.is_integer():
            return None
        return plain + ", got a number with a fractional part"
    if isinstance(value, str):
        try:
            int(value) if kind == "int" else float(value)
        except ValueError:
            what = "an integer" if kind == "int" else "a number"
            return f"{plain}, unable to parse string as {what}"
        return None
    return plain


def check_types(args: Mapping[str, str], base: Mapping[str, Any]) -> list[Finding]:
    """Each value against the type of its base.yml default, as pydantic (lax mode) judges it."""
    problems: list[str] = []
    fixes: list[str] = []
    for key, text in args.items():
        if key not in base:
            continue
        problem = type_problem(key, maxtext_input(cli_value(text)), base[key])
        if problem:
            problems.append(
                f"{key}={short(text)}: {problem}"
                + (" (an empty value reads as null)" if text == "" else "")
            )
            word = _WORD[expected_kind(key, base[key])]
            article = "an" if word[0] in "aeiou" else "a"
            fixes.append(f"{key} takes {article} {word} (base.yml: {key}: {base[key]!r})")
    if problems:
        return [
            Finding(
                f"{NAME} types",
                Level.FAIL,
                "MAXTEXT CONFIG ERROR: validation error for MaxTextConfig — " + "; ".join(problems),
                fix="; ".join(fixes),
            )
        ]
    return [Finding(f"{NAME} types", Level.PASS, "every value has the type MaxText expects")]


def typed_values(
    args: Mapping[str, str], base: Mapping[str, Any], effective: Mapping[str, Any]
) -> dict[str, Any]:
    """``effective`` with the command's values typed as MaxText types them: ``steps=1e3`` is the
    integer 1000 there (YAML alone leaves the text ``1e3``)."""
    out = dict(effective)
    for key, text in args.items():
        if key not in base or key not in out or out[key] != parse_value(text):
            continue  # not a setting, or the model file's value stands
        value = maxtext_input(cli_value(text))
        kind = expected_kind(key, base[key])
        if kind == "int" and isinstance(value, float) and value.is_integer():
            value = int(value)
        out[key] = value
    return out


def model_file(name: str) -> str:
    """The models/<file>.yml MaxText reads for ``name`` (it drops ``-Instruct``)."""
    return name.replace("-Instruct", "")


def accepted_models(configs: MaxTextConfigs) -> list[str]:
    files = set(configs.model_names()) - MODELS_REJECTED
    return sorted(files | MODELS_WITHOUT_FILE | MODELS_INSTRUCT | {"default"})


def check_model(configs: MaxTextConfigs, args: Mapping[str, str]) -> list[Finding]:
    """The model name, and model-file keys the command sets without ``override_model_config``."""
    name = str(cli_value(args.get("model_name", "default")))
    if name == "default":
        return [Finding(f"{NAME} model", Level.PASS, "model_name=default: base.yml's shapes")]
    has_file = (configs.root / "models" / f"{model_file(name)}.yml").is_file()
    accepted = (
        name in MODELS_WITHOUT_FILE
        or name in MODELS_INSTRUCT
        or (has_file and name == model_file(name) and name not in MODELS_REJECTED)
    )
    if not accepted:
        names = accepted_models(configs)
        close = difflib.get_close_matches(name, names, n=4, cutoff=0.6)
        return [
            Finding(
                f"{NAME} model",
                Level.FAIL,
                f"MAXTEXT CONFIG ERROR: model_name: Input should be 'default', 'llama2-7b', … "
                f"({len(names)} names) [type=literal_error, input_value={name!r}]",
                fix=f"use {' or '.join(close) if close else 'a model MaxText lists'} "
                f"(MaxText {MAXTEXT.version} knows {len(names)}: {', '.join(names[:8])}, …)",
            )
        ]
    if not has_file:
        return [
            Finding(
                f"{NAME} model",
                Level.WARN,
                f"MaxText accepts model_name={name} but has no models/{name}.yml: it logs "
                f"`Model config for '{name}' not found` and trains base.yml's default shapes",
                fix="set the model's shapes on the command line with override_model_config=true, "
                "or pick a model with a file",
            )
        ]
    model = configs.model(model_file(name))
    return [
        Finding(f"{NAME} model", Level.PASS, f"model {name} (models/{model_file(name)}.yml)"),
        *_model_keys(name, model, args),
    ]


def _model_keys(name: str, model: Mapping[str, Any], args: Mapping[str, str]) -> list[Finding]:
    given = [k for k in args if k in model and k != "model_name"]
    if not given:
        return []
    override = bool(cli_value(args.get("override_model_config", "false")))
    differ = [k for k in given if cli_value(args[k]) != _file_value(model[k])]
    if override or not differ:
        why = "override_model_config is set" if override else "each repeats the file's value"
        return [
            Finding(
                f"{NAME} model keys", Level.PASS, f"{', '.join(given)} also in {name}.yml; {why}"
            )
        ]
    shown = ", ".join(f"{k}={args[k]} ({name}.yml: {model[k]!r})" for k in differ)
    return [
        Finding(
            f"{NAME} model keys",
            Level.FAIL,
            f"MAXTEXT CONFIG ERROR: Keys {differ!r} are overridden by both model config and "
            "CLI/kwargs with different values.This is not allowed, unless setting "
            f"`override_model_config=True`. Here: {shown}",
            fix="add `--set override_model_config=true` to use the command's values, or "
            f"`{names.flags(differ, [])}` to keep {name}'s",
        )
    ]


def _file_value(value: Any) -> Any:
    """A model-file value as OmegaConf loads it (``1e-5`` is a float there, a string to PyYAML)."""
    return float(value) if isinstance(value, str) and _FLOAT.fullmatch(value) else value


def check_static(
    request: MaxTextRequest, configs: MaxTextConfigs, _effective: Mapping[str, Any] | None = None
) -> list[Finding]:
    """Every fast MaxText-configuration finding for one command (pure: reads the files only)."""
    index = name_index(tuple(configs.base))
    return [
        *check_keys(request.args, index),
        *check_types(request.args, configs.base),
        *check_model(configs, request.args),
    ]
