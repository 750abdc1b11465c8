"""The scenario file's schema: value types with their messages, the known keys of each mapping,
and the one place a schema error becomes ``scenario.yaml: key.path: problem``.

The scenario classes are pydantic dataclasses whose fields use the types below; each class
names its keys with :func:`keys` in a ``mode="before"`` model validator. Every problem is a
:class:`PydanticCustomError` of type ``scenario`` carrying the problem and, when it is about a
key below the one pydantic was validating, that key (``in_use_hosts``, ``flavors.v5e``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationError, ValidationInfo
from pydantic_core import ArgsKwargs, PydanticCustomError

from tpu_trainer.errors import ConfigError

FIX = "see docs/simulated-cloud.md for the scenario file format"


def problem(text: str, key: str = "") -> PydanticCustomError:
    return PydanticCustomError("scenario", "{problem}", {"problem": text, "key": key})


def mapping(data: Any, key: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        raise problem(f"expected a mapping, got {type(data).__name__}", key)
    return data


def keys(
    data: Any, known: tuple[str, ...], *, required: tuple[str, ...] = (), optional: bool = False
) -> Any:
    """``data`` checked as a mapping with only the ``known`` keys (the alphabetically first
    unknown one is reported). ``required`` keys that are absent become null, so their type
    says what is wrong; ``optional``: null stands for an empty mapping (every default)."""
    if isinstance(data, ArgsKwargs):  # built in code, not read from a file
        return data
    if data is None and optional:
        data = {}
    found = mapping(data)
    unknown = sorted(set(found) - set(known), key=str)
    if unknown:
        raise problem(f"unknown key (known: {', '.join(known)})", str(unknown[0]))
    return {**dict.fromkeys(required), **found}


def base_dir(info: ValidationInfo) -> Path | None:
    """The scenario file's folder (relative ``*_file`` names are read from there)."""
    context = info.context if isinstance(info.context, dict) else {}
    base = context.get("base")
    return base if isinstance(base, Path) else None


def text_or_file(data: dict[str, Any], key: str, base: Path | None) -> dict[str, Any]:
    """``data`` with ``<key>_file``'s contents as ``key`` (relative to ``base``)."""
    name = f"{key}_file"
    if data.get(name) is None:
        data.pop(name, None)
        return data
    if key in data:
        raise problem(f"give either {key} or {name}, not both", name)
    try:
        path = Path(_text(data.pop(name))).expanduser()
    except PydanticCustomError as e:
        raise problem(str(e.message()), name) from None
    path = path if path.is_absolute() or base is None else base / path
    try:
        data[key] = path.read_text(encoding="utf-8")
    except OSError as e:
        raise problem(f"cannot read {path}: {e.strerror}", name) from None
    return data


def _text(value: Any) -> str:
    if value is None:
        raise problem("required")
    if not isinstance(value, str) or not value:
        raise problem(f"expected a non-empty string, got {value!r}")
    return value


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _any_text(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise problem("expected text")
    return value


def one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        found = _text(value)
        if found not in choices:
            raise problem(f"{found!r} is not one of {', '.join(choices)}")
        return found

    return check


def whole_number(value: Any, minimum: int = 0, key: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise problem(f"expected a whole number, got {value!r}", key)
    if value < minimum:
        raise problem(f"must be at least {minimum}, got {value}", key)
    return value


def at_least(minimum: int) -> Callable[[Any], int]:
    return lambda value: whole_number(value, minimum)


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise problem(f"expected seconds (a number >= 0), got {value!r}")
    return float(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise problem(f"expected true or false, got {value!r}")
    return value


def _maybe_flag(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise problem("expected true, false or null")
    return value


def _names(value: Any) -> tuple[str, ...]:
    value = value or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise problem("expected a list of names")
    return tuple(value)


def items(value: Any) -> list[Any]:
    value = value or []
    if not isinstance(value, list):
        raise problem("expected a list")
    return value


def numbers(value: Any, prefix: str = "") -> dict[str, int]:
    """A mapping of name -> whole number (``prefix`` is the key path below the field)."""
    found = mapping(value, prefix)
    return {
        k: whole_number(v, key=".".join(p for p in (prefix, str(k)) if p)) for k, v in found.items()
    }


Text = Annotated[str, BeforeValidator(_text)]
MaybeText = Annotated[str | None, BeforeValidator(_maybe_text)]
AnyText = Annotated[str | None, BeforeValidator(_any_text)]
Count = Annotated[int, BeforeValidator(whole_number)]
MaybeCount = Annotated[
    int | None, BeforeValidator(lambda v: None if v is None else whole_number(v))
]
Seconds = Annotated[float, BeforeValidator(_seconds)]
Flag = Annotated[bool, BeforeValidator(_flag)]
MaybeFlag = Annotated[bool | None, BeforeValidator(_maybe_flag)]
Names = Annotated[tuple[str, ...], BeforeValidator(_names)]


def scenario_error(error: ValidationError, source: str) -> ConfigError:
    """The first schema error as ``source: key.path: problem``."""
    first = error.errors()[0]
    path = ""
    for part in first["loc"]:
        if part == "script" and path.endswith("train"):
            continue  # a train script's keys sit beside the train keys in the file
        path = f"{path}[{part}]" if isinstance(part, int) else f"{path}.{part}" if path else part
    ctx = first.get("ctx") or {}
    key = str(ctx.get("key", ""))
    text = str(ctx["problem"]) if "problem" in ctx else first["msg"]
    if first["type"] == "missing":
        text = "required"
    where = ".".join(p for p in (path, key) if p) or "(top level)"
    return ConfigError(f"{source}: {where}: {text}", fix=FIX)
