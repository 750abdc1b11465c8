"""All pre-flight checks of one plan, in the order a user reads them.

Fast checks are pure and read only files (MaxText's configuration files, the recipe folder,
local data); the runtime checks ask MaxText and JAX themselves in the runtime (seconds); the AOT
check compiles the train step for the target topology (minutes, then cached).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.checks.skip import skip_findings, skips
from tpu_trainer.config.model import short
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.frameworks.maxtext.version_select import TargetVersion, select_version
from tpu_trainer.plan.plan import Finding, Level, Plan
from tpu_trainer.recipes.recipe import Framework

FastCheck = Callable[[MaxTextRequest, MaxTextConfigs, Mapping[str, Any]], list[Finding]]


@dataclass(frozen=True, slots=True)
class CheckReport:
    findings: tuple[Finding, ...]
    seconds: Mapping[str, float] = field(default_factory=dict)
    """Wall time of each group of checks."""

    def skipping(self, names: Sequence[str]) -> CheckReport:
        """Without the findings ``--skip-check`` names (see checks/skip.py)."""
        return CheckReport(skip_findings(self.findings, names), self.seconds) if names else self

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is Level.FAIL)

    @property
    def warned(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is Level.WARN)

    def to_json(self) -> dict[str, Any]:
        return {
            "checks": [
                {"name": f.name, "status": f.status.value, "message": f.message, "fix": f.fix}
                for f in self.findings
            ]
        }


def _fast_checks(target: TargetVersion) -> list[tuple[str, FastCheck]]:
    from tpu_trainer.checks import data, mesh, pyconfig_version, resumability, sharding
    from tpu_trainer.checks import memory_estimate as estimate

    def config_check(
        req: MaxTextRequest, cfg: MaxTextConfigs, _: Mapping[str, Any]
    ) -> list[Finding]:
        return pyconfig_version.check_versioned(target, req, cfg)

    def data_check(req: MaxTextRequest, _: MaxTextConfigs, eff: Mapping[str, Any]) -> list[Finding]:
        return data.check_data(eff, req.devices_per_slice, req.num_slices, base=Path.cwd())

    return [
        ("maxtext-config", config_check),
        ("mesh", mesh.check_mesh),
        ("sharding", sharding.check_sharding),
        ("memory-fit (estimate)", estimate.check_estimate),
        ("data", data_check),
        ("resumability", resumability.check_resumability),
    ]


def fast_findings(
    plan: Plan, configs: MaxTextConfigs | None = None, *, fetch: bool = True
) -> CheckReport:
    """The plan's own findings, recipe sanity, and every fast check of the MaxText command.

    Without the runtime, MaxText's configuration files come from its wheel (downloaded once)
    when ``fetch``; otherwise the MaxText checks are reported as not run."""
    from tpu_trainer.checks.local_files import check_local_files
    from tpu_trainer.checks.recipe_sanity import check_recipe

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    findings = [*plan.findings, *check_recipe(plan), *check_local_files(plan)]
    seconds["recipe"] = time.perf_counter() - started
    if plan.recipe.framework is not Framework.MAXTEXT:
        findings.append(
            Finding(
                "maxtext-checks",
                Level.WARN,
                f"a {plan.recipe.framework.value} recipe: the MaxText configuration, mesh, "
                "sharding, memory and data checks do not apply",
            )
        )
        return CheckReport(tuple(findings), seconds).skipping(plan.checks.skip)
    try:
        configs = configs or MaxTextConfigs.load(fetch=fetch)
    except TpuTrainerError as e:
        findings.append(Finding("maxtext-config", Level.WARN, e.message, e.fix))
        return CheckReport(tuple(findings), seconds).skipping(plan.checks.skip)
    request = MaxTextRequest.from_plan(plan)
    findings += _maxtext_findings(request, configs, seconds, target_version(plan), plan.checks.skip)
    return CheckReport(tuple(findings), seconds).skipping(plan.checks.skip)


def target_version(plan: Plan) -> TargetVersion:
    """The MaxText version the plan's arguments are judged against (see version_select)."""
    return select_version(
        plan.checks.maxtext_version, plan.config.maxtext_branch, plan.recipe_script
    )


def _maxtext_findings(
    request: MaxTextRequest,
    configs: MaxTextConfigs,
    seconds: dict[str, float],
    target: TargetVersion,
    skip: Sequence[str] = (),
) -> list[Finding]:
    """The MaxText configuration check, then (when every value has its type) the others."""
    from tpu_trainer.checks.pyconfig import typed_values

    try:
        effective: Mapping[str, Any] | None = configs.effective(request.args)
    except TpuTrainerError:
        effective = None  # an unknown model: the configuration check says which names exist
    findings: list[Finding] = []
    for name, check in _fast_checks(target):
        if skips(skip, name):
            continue
        started = time.perf_counter()
        if name != "maxtext-config" and effective is None:
            continue
        if name != "maxtext-config" and _types_failed(findings):
            findings.append(_NOT_RUN)
            break
        typed = typed_values(request.args, configs.base, effective or {})
        try:
            findings += check(request, configs, typed)
        except (ValueError, TypeError, ArithmeticError) as e:
            findings.append(
                Finding(name, Level.FAIL, f"a value could not be read: {short(str(e))}", _FIX)
            )
        seconds[name] = time.perf_counter() - started
    return findings


_FIX = "give each MaxText argument a value of its type (see `tpu-trainer check`)"
_NOT_RUN = Finding(
    "mesh, sharding, memory, data",
    Level.WARN,
    "not checked: they need every MaxText value to have its type",
    fix="fix the values the `maxtext-config types` check names, then check again",
)


def _types_failed(findings: list[Finding]) -> bool:
    return any(f.name.endswith(" types") and f.status is Level.FAIL for f in findings)


def runtime_findings(plan: Plan, runner: Any, *, aot: bool) -> CheckReport:
    """Checks that ask MaxText and JAX in the runtime (and the AOT compile when asked)."""
    from tpu_trainer.checks import aot as aot_check
    from tpu_trainer.checks import mesh_runtime, pyconfig_runtime

    if plan.recipe.framework is not Framework.MAXTEXT:
        return CheckReport(())
    request = MaxTextRequest.from_plan(plan)
    target = target_version(plan)
    seconds: dict[str, float] = {}
    findings: list[Finding] = []
    steps: list[tuple[str, Callable[[], Sequence[Finding]]]] = [
        (
            "maxtext-config (MaxText pyconfig)",
            lambda: pyconfig_runtime.for_version(
                pyconfig_runtime.check_runtime(request, runner), request, target.table
            ),
        ),
        (mesh_runtime.NAME, lambda: mesh_runtime.check_mesh_with_jax(request, runner)),
    ]
    if aot:
        steps.append(("memory-fit (AOT)", lambda: aot_check.check_aot(request, runner)))
    for name, step in steps:
        if skips(plan.checks.skip, name):
            continue  # not run at all: the AOT compile takes minutes
        started = time.perf_counter()
        findings += step()
        seconds[name] = time.perf_counter() - started
    return CheckReport(tuple(findings), seconds).skipping(plan.checks.skip)
