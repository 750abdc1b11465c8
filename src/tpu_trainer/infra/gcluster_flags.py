"""Checking ``gcluster job submit`` command lines against a model of gcluster's own flags.

gcluster (Cluster Toolkit's Go CLI) cannot be installed here. ``gcluster_flags.yaml``, written by
``tools/build_gcluster_flags.py`` from Cluster Toolkit's cobra command files, holds every flag of
``gcluster job submit`` (kind, shorthand, default, choices), the required ones, the longest
``--name`` and the image rules; :func:`check_gcluster_argv` parses an argv the way cobra's pflag
does and says what gcluster would refuse. Flags the sources did not define but recipes pass are
in the file under ``assumed:``, with their evidence; an argv using them is reported as such.
The other ``gcluster job`` sub-commands the tool runs (``cancel``, ``list``, ``logs``) are in the
file under ``subcommands:``; :func:`check_gcluster_command` reads any ``gcluster job`` line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import cast

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    strings,
    text,
)

DATA_FILE = "gcluster_flags.yaml"
KINDS = frozenset({"string", "int", "bool", "string-list", "int-list", "key-value"})
_BOOL_VALUES = frozenset({"1", "0", "t", "f", "true", "false", "True", "False", "TRUE", "FALSE"})


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    kind: str
    short: str = ""
    required: bool = False
    choices: tuple[str, ...] = ()
    inherited: bool = False
    """A ``gcluster job`` flag every sub-command takes (``--cluster``, ``--location``, ...)."""
    assumed: str = ""
    """Why the flag is accepted though the sources read do not define it (empty: defined)."""


@dataclass(frozen=True, slots=True)
class Subcommand:
    """A ``gcluster job`` sub-command other than ``submit``: its positional arguments (None:
    any number) and its own flags."""

    args: int | None
    flags: Mapping[str, Flag]


@dataclass(frozen=True, slots=True)
class GclusterModel:
    commit: str
    command: tuple[str, ...]
    name_max: int
    name_pattern: re.Pattern[str]
    flags: Mapping[str, Flag]
    rules: tuple[tuple[str, tuple[str, ...]], ...]
    subcommands: Mapping[str, Subcommand] = field(default_factory=dict)

    def by_short(self, short: str) -> Flag | None:
        return next((f for f in self.flags.values() if f.short == short), None)

    def flags_of(self, command: str) -> Mapping[str, Flag]:
        """The flags ``gcluster job <command>`` takes: its own and the inherited ones."""
        if command == "submit":
            return self.flags
        inherited = {n: f for n, f in self.flags.items() if f.inherited}
        return {**inherited, **self.subcommands[command].flags}


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    problems: tuple[str, ...]
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each flag given, with its values in order (``"true"`` for a switch)."""
    assumed: tuple[str, ...] = ()
    """Flags used that the model only assumes (see ``assumed:`` in the data file)."""
    command: str = "submit"
    positional: tuple[str, ...] = ()

    def value(self, name: str) -> str | None:
        """The last value given to ``--name``, or None."""
        given = self.values.get(name)
        return given[-1] if given else None


def _flag(where: str, name: str, raw: Mapping[str, object], assumed: str = "") -> Flag:
    kind = text(where, raw, "kind")
    if kind not in KINDS:
        raise DataFileError(f"{where}: kind must be one of {', '.join(sorted(KINDS))}")
    short = raw.get("short", "")
    if not isinstance(short, str) or len(short) > 1:
        raise DataFileError(f"{where}: short must be one letter")
    choices = strings(where, raw, "choices") if "choices" in raw else ()
    required, inherited = raw.get("required") is True, raw.get("inherited") is True
    return Flag(name, kind, short, required, choices, inherited, assumed)


def _body(where: str, entry: object) -> Mapping[str, object]:
    if not isinstance(entry, dict) or not all(isinstance(k, str) for k in entry):
        raise DataFileError(f"{where} must be a mapping with string keys")
    return cast(Mapping[str, object], entry)


@cache
def load_model() -> GclusterModel:
    """The shipped flag model (read once)."""
    raw = parse_mapping(read_packaged("tpu_trainer.infra", DATA_FILE), DATA_FILE)
    flags: dict[str, Flag] = {}
    for name, entry in mapping(DATA_FILE, raw, "flags").items():
        where = f"{DATA_FILE}: flags.{name}"
        flags[name] = _flag(where, name, _body(where, entry))
    assumed = mapping(DATA_FILE, raw, "assumed") if "assumed" in raw else {}
    for name, entry in assumed.items():
        where = f"{DATA_FILE}: assumed.{name}"
        body = _body(where, entry)
        flags[name] = _flag(where, name, body, text(where, body, "evidence"))
    naming = mapping(DATA_FILE, raw, "name")
    name_max = naming.get("max_length")
    if not isinstance(name_max, int):
        raise DataFileError(f"{DATA_FILE}: name.max_length must be a number")
    rules: list[tuple[str, tuple[str, ...]]] = []
    raw_rules = raw.get("rules", [])
    for n, rule in enumerate(raw_rules if isinstance(raw_rules, list) else []):
        where = f"{DATA_FILE}: rules[{n}]"
        body = _body(where, rule)
        rules.append((text(where, body, "rule"), strings(where, body, "flags")))
    subs: dict[str, Subcommand] = {}
    raw_subs = mapping(DATA_FILE, raw, "subcommands") if "subcommands" in raw else {}
    for word, entry in raw_subs.items():
        where = f"{DATA_FILE}: subcommands.{word}"
        body = _body(where, entry)
        own = _body(f"{where}.flags", body.get("flags", {}))
        args = body.get("args")
        subs[word] = Subcommand(
            args if isinstance(args, int) else None,
            {n: _flag(f"{where}.flags.{n}", n, _body(where, e)) for n, e in own.items()},
        )
    return GclusterModel(
        commit=text(DATA_FILE, raw, "commit"),
        command=strings(DATA_FILE, raw, "command"),
        name_max=name_max,
        name_pattern=re.compile(text(f"{DATA_FILE}: name", naming, "pattern")),
        flags=flags,
        rules=tuple(rules),
        subcommands=subs,
    )


def _value_problem(flag: Flag, value: str) -> str | None:
    if flag.kind == "int" and re.fullmatch(r"[+-]?\d+", value) is None:
        return f'invalid argument "{value}" for "--{flag.name}" flag: not an integer'
    if flag.kind == "int-list" and not all(
        re.fullmatch(r"[+-]?\d+", v.strip()) for v in value.split(",")
    ):
        return f'invalid argument "{value}" for "--{flag.name}" flag: not a list of integers'
    if flag.kind == "bool" and value not in _BOOL_VALUES:
        return f'invalid argument "{value}" for "--{flag.name}" flag: not a boolean'
    if flag.kind == "key-value" and not all("=" in v for v in value.split(",")):
        return f'invalid argument "{value}" for "--{flag.name}" flag: expected key=value'
    if flag.choices and value not in flag.choices:
        return f"--{flag.name} {value}: allowed values are {', '.join(flag.choices)}"
    return None


def _parse(
    flags: Mapping[str, Flag], words: Sequence[str]
) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """pflag's reading: the values per flag, the problems, and the positional words."""
    values: dict[str, list[str]] = {}
    problems: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            positional.extend(words[i:])
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        long = word.startswith("--")
        key, eq, value = word[2 if long else 1 :].partition("=")
        flag = flags.get(key) if long else next((f for f in flags.values() if f.short == key), None)
        if flag is None:
            shown = f"--{key}" if long else f"-{key}"
            problems.append(
                f"unknown flag: {shown}" if long else f"unknown shorthand flag: {shown}"
            )
            continue
        if not eq:
            if flag.kind == "bool":
                value = "true"
            elif i < len(words):
                value, i = words[i], i + 1
            else:
                problems.append(f"flag needs an argument: --{flag.name}")
                continue
        problem = _value_problem(flag, value)
        if problem is not None:
            problems.append(problem)
        values.setdefault(flag.name, []).append(value)
    return values, problems, positional


def _rule_problems(model: GclusterModel, given: Mapping[str, list[str]]) -> list[str]:
    problems: list[str] = []
    for rule, names in model.rules:
        present = [n for n in names if any(v for v in given.get(n, []))]
        if rule == "one_of" and not present:
            problems.append(f"either --{names[0]} or --{names[1]} must be provided")
        elif rule == "excludes" and len(present) == len(names):
            problems.append(f"--{names[1]} cannot be provided with --{names[0]}")
        elif rule == "together" and names[0] in present and names[1] not in present:
            problems.append(f"--{names[1]} must be provided with --{names[0]}")
    return problems


def check_gcluster_argv(argv: Sequence[str], model: GclusterModel | None = None) -> Verdict:
    """What gcluster would say of ``argv`` (``gcluster job submit ...``, its first words optional)."""
    model = model or load_model()
    words = list(argv)
    for head in model.command:
        if words[:1] == [head]:
            words = words[1:]
    values, problems, positional = _parse(model.flags, words)
    if positional:
        problems.append(f"unexpected arguments {positional}: gcluster job submit takes flags only")
    for flag in model.flags.values():
        if flag.required and flag.name not in values:
            problems.append(f'required flag(s) "{flag.name}" not set')
    for name in values.get("name", [])[-1:]:
        if len(name) > model.name_max:
            problems.append(
                f"workload name cannot exceed {model.name_max} characters: {name!r} has {len(name)}"
            )
        if model.name_pattern.match(name) is None or "--" in name:
            problems.append(
                f"--name {name!r} is not a valid name: lower-case letters, digits and single "
                "hyphens, starting with a letter"
            )
    problems += _rule_problems(model, values)
    assumed = tuple(n for n in values if model.flags[n].assumed)
    return Verdict(not problems, tuple(problems), {k: tuple(v) for k, v in values.items()}, assumed)


def check_gcluster_command(argv: Sequence[str], model: GclusterModel | None = None) -> Verdict:
    """What gcluster would say of any ``gcluster job ...`` line the tool runs: ``submit`` as
    :func:`check_gcluster_argv`, ``cancel``/``list``/``logs`` by their own flags and arguments."""
    model = model or load_model()
    words = list(argv[1:] if argv[:1] == ["gcluster"] else argv)
    if words[:1] != ["job"] or len(words) < 2:
        return Verdict(False, ("unknown command: the tool runs `gcluster job ...` only",))
    command, rest = words[1], words[2:]
    if command == "submit":
        return check_gcluster_argv(rest, model)
    sub = model.subcommands.get(command)
    if sub is None:
        return Verdict(False, (f'unknown command "{command}" for "gcluster job"',), command=command)
    values, problems, positional = _parse(model.flags_of(command), rest)
    if sub.args is not None and len(positional) != sub.args:
        problems.append(f"accepts {sub.args} arg(s), received {len(positional)}")
    given = {k: tuple(v) for k, v in values.items()}
    return Verdict(not problems, tuple(problems), given, (), command, tuple(positional))
