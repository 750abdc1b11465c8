"""A rehearsal: the real pipeline, with the fake cloud's gcloud and xpk first on PATH (its
kubectl is the real one, against the emulated Kubernetes API: ``simcloud.rehearsal``)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from tpu_trainer.config.model import Config, Reservation, Source
from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import Scenario, load_scenario
from tpu_trainer.fakecloud.shims import fake_cloud_env, write_shims
from tpu_trainer.infra.tool_env import cache_dir


def _reservation_order(scenario: Scenario, user: Config | None) -> list[str]:
    """The scenario's reservations, those the configuration names first and in its order."""
    names = [r.name for r in scenario.reservations]
    wanted = [r.name for r in user.reservations] if user is not None else []
    first = [n for n in dict.fromkeys(wanted) if n in names]
    return [*first, *(n for n in names if n not in first)]


def reservation_notice(config: Config, user: Config | None) -> str:
    """What a rehearsal tries, in which order, and how that relates to the configuration."""
    used = [r.name for r in config.reservations]
    shown = ", ".join(used) or "none"
    wanted = [r.name for r in user.reservations] if user is not None else []
    if not wanted:
        return f"rehearsal: reservations from the scenario, in its order: {shown}"
    missing = [n for n in wanted if n not in used]
    if len(missing) == len(wanted):
        return (
            f"rehearsal: none of the configuration's reservations ({', '.join(wanted)}) is in "
            f"the scenario; trying the scenario's instead, in its order: {shown}"
        )
    text = f"rehearsal: reservations in the configuration's order, then the scenario's: {shown}"
    return text + (f" (not in the scenario: {', '.join(missing)})" if missing else "")


def rehearsal_config(scenario: Scenario, source: str, user: Config | None) -> Config:
    """The configuration of a rehearsal: where to run comes from the scenario (the fake cloud
    knows nothing else), its reservations tried in the configuration's order where it names
    them; the rest (image, output, recipes path) from the user's configuration."""
    order = _reservation_order(scenario, user)
    zones = {r.name: r.zone for r in scenario.reservations}
    first_zone = next(
        (zones[n] for n in order),
        next(
            (p.zone for p in scenario.node_pools),
            next(iter(scenario.tpu_vm.zones), f"{scenario.region}-a"),
        ),
    )
    where = Source(f"scenario {source}")
    base = Config(
        project_id=scenario.project,
        cluster_name=scenario.cluster.name,
        reservations=tuple(Reservation(n) for n in order),
        default_zone=first_zone,
        region=scenario.region,
        base_output_dir="gs://rehearsal-bucket/runs",
        workload_image=f"gcr.io/{scenario.project}/rehearsal-runner",
        sources=dict.fromkeys(
            (
                "project_id",
                "cluster_name",
                "reservations",
                "default_zone",
                "region",
                "base_output_dir",
                "workload_image",
            ),
            where,
        ),
    )
    if user is None:
        return base
    keep = {
        k: v
        for k, v in user.sources.items()
        if k not in ("project_id", "cluster_name", "reservations", "default_zone", "region")
    }
    return replace(
        base,
        base_output_dir=user.base_output_dir or base.base_output_dir,
        workload_image=user.workload_image or base.workload_image,
        tpu_recipes_path=user.tpu_recipes_path,
        maxtext_branch=user.maxtext_branch,
        jax_version=user.jax_version,
        libtpu_version=user.libtpu_version,
        machine_type=user.machine_type,
        prices=user.prices,
        watchdog_k=user.watchdog_k,
        first_step_deadline=user.first_step_deadline,
        sources={**base.sources, **keep},
        path=user.path,
    )


def rehearsal_dir(scenario_path: Path, env: dict[str, str]) -> Path:
    """Where a scenario's fake cloud lives between commands (``train`` then ``cleanup``/``gc``)."""
    if env.get("TPU_TRAINER_REHEARSAL_DIR"):
        return Path(env["TPU_TRAINER_REHEARSAL_DIR"]).expanduser()
    key = hashlib.sha256(str(scenario_path.resolve()).encode()).hexdigest()[:12]
    return cache_dir(env) / "rehearsals" / key


def prepare(
    scenario_path: Path, user: Config | None, env: dict[str, str], *, fresh: bool
) -> tuple[Config, dict[str, str], Path]:
    """Lay out (``fresh``) or reuse the scenario's fake cloud; return the configuration and the
    environment to run with, and the folder holding the fake cloud's state."""
    scenario = load_scenario(scenario_path)
    workdir = rehearsal_dir(scenario_path, env)
    state = workdir / "state.json"
    if fresh or not state.exists():
        workdir.mkdir(parents=True, exist_ok=True)
        init_state(scenario, state)
    bin_dir = workdir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    write_shims(bin_dir)
    fake_env = {**env, **fake_cloud_env(bin_dir, state)}
    return rehearsal_config(scenario, str(scenario_path), user), fake_env, workdir
