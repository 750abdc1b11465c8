"""Plan a request: resolve it, read its recipe and the configuration, compute the plan."""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from tpu_trainer.config.load import load_config
from tpu_trainer.config.model import EMPTY, Config
from tpu_trainer.plan.plan import Plan, PlanOptions, build_plan
from tpu_trainer.recipes.read import read_recipe
from tpu_trainer.recipes.resolve import Filters, resolve


@dataclass(frozen=True, slots=True)
class Request:
    text: str
    filters: Filters = field(default_factory=Filters)
    config_path: Path | None = None
    require_config: bool = False


def current_user(env: dict[str, str] | None = None) -> str:
    """The user's name ($USER, $LOGNAME, then the password database); without any of them
    (a container running as an unnamed uid) ``uid<N>``, never a traceback."""
    env = dict(os.environ) if env is None else env
    for name in ("USER", "LOGNAME"):
        if env.get(name):
            return env[name]
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid{os.getuid()}"


def plan_request(request: Request, opts: PlanOptions) -> Plan:
    """Everything ``plan`` shows, computed from files only (the configuration found as usual)."""
    config = load_config(request.config_path, require=request.require_config) or EMPTY
    return plan_with_config(request, config, opts)


def plan_with_config(request: Request, config: Config, opts: PlanOptions) -> Plan:
    """Like :func:`plan_request`, with a configuration already in hand."""
    filters = request.filters
    if filters.submitter is None and config.submitter is not None:
        filters = replace(filters, submitter=config.submitter)
    ref = resolve(request.text, config.tpu_recipes_path, filters)
    recipe = read_recipe(ref, dict(opts.variables))
    return build_plan(
        model=ref.model,
        recipe_script=ref.script,
        output_folder=ref.folder,
        model_dir=ref.model_dir,
        folder=ref.parsed,
        recipe=recipe,
        config=config,
        opts=opts,
    )
