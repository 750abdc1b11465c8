"""MaxText configuration judged against the version the run's image runs (``--maxtext-version``,
the configuration's ``maxtext_branch``, the recipe README's pin, else the runtime's 0.2.5).

The runtime's version is judged with its own ``base.yml`` and model files (``checks/pyconfig.py``);
any other version with its packaged key table (``frameworks/maxtext/versions.py``): the keys, the
type of each default, the model names. Either way, a key the judged version lacks but another
one has says so (renamed, or a setting of other versions) with the flags that fix it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from tpu_trainer.checks.pyconfig import check_model, check_types
from tpu_trainer.checks.pyconfig_names import NAME, KeyNote, check_keys, name_index
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.frameworks.maxtext.version_select import TargetVersion
from tpu_trainer.frameworks.maxtext.versions import KeyTable, maxtext_versions
from tpu_trainer.plan.plan import Finding, Level

VERSION_NAME = f"{NAME} version"


def key_note(key: str, table: KeyTable) -> KeyNote | None:
    """What the other versions say about ``key``, which ``table``'s version lacks."""
    versions = maxtext_versions()
    runs = f"your image runs {table.label}"
    rename = versions.renames.get(key)
    if rename is not None and rename.new in table.keys:
        when = (
            f"after {versions.tables[rename.after].label}"
            if rename.after in versions.tables
            else ""
        )
        commit = f" in {rename.commit} ({rename.date})" if rename.commit else ""
        return KeyNote(f"`{key}` was renamed `{rename.new}` {when}{commit}; {runs}", rename.new)
    older = next(
        (r for r in versions.renames.values() if r.new == key and r.old in table.keys), None
    )
    if older is not None:
        return KeyNote(
            f"`{key}` is the newer name of `{older.old}` (renamed in {older.commit or 'MaxText'}); "
            f"{runs}, which calls it `{older.old}`",
            older.old,
        )
    having = versions.having(key)
    if not having:
        first, *_, last = versions.tables.values()
        return KeyNote(f"no known MaxText version ({first.label} … {last.label}) has `{key}`")
    span = having[0].label if len(having) == 1 else f"{having[0].label} … {having[-1].label}"
    return KeyNote(
        f"`{key}` is a setting of MaxText {span} ({len(having)} of the known versions), not of "
        f"{table.label}; {runs}: drop it, or judge with --maxtext-version {having[-1].name}"
    )


def version_finding(target: TargetVersion) -> Finding:
    """Which version the keys were judged against, and why."""
    if target.missing:
        known = ", ".join(maxtext_versions().tables)
        return Finding(
            VERSION_NAME,
            Level.WARN,
            f"judged against {target.why()}",
            fix=f"pass --maxtext-version with one of: {known}; or add {target.asked} to the "
            f"tables: python tools/build_maxtext_keys.py --mirror MAXTEXT_GIT --rev {target.asked}",
        )
    return Finding(VERSION_NAME, Level.PASS, f"judged against {target.why()}")


def _check_model(table: KeyTable, args: Mapping[str, str]) -> list[Finding]:
    name = args.get("model_name", "default").replace("-Instruct", "")
    if name == "default" or name in table.models:
        return [Finding(f"{NAME} model", Level.PASS, f"model {name} (MaxText {table.label})")]
    return [
        Finding(
            f"{NAME} model",
            Level.FAIL,
            f"MaxText {table.label} has no models/{name}.yml",
            fix=f"use a model it has ({', '.join(sorted(table.models)[:8])}, …), or judge with "
            "--maxtext-version of the version the recipe was written for",
        )
    ]


def check_versioned(
    target: TargetVersion, request: MaxTextRequest, configs: MaxTextConfigs
) -> list[Finding]:
    """Every fast MaxText-configuration finding for one command, against ``target``."""
    table = target.table
    history = functools.partial(key_note, table=table)
    if target.is_reference:
        return [
            version_finding(target),
            *check_keys(request.args, name_index(tuple(configs.base)), history=history),
            *check_types(request.args, configs.base),
            *check_model(configs, request.args),
        ]
    defaults: dict[str, Any] = table.defaults()
    return [
        version_finding(target),
        *check_keys(
            request.args, name_index(tuple(table.keys)), version=table.label, history=history
        ),
        *check_types(request.args, defaults),
        *_check_model(table, request.args),
    ]
