"""The simulated cloud's scenarios and state, and stand-ins for what is no Google API:
``xpk``, ``gcluster``, ``tpu-vm ssh``/``scp`` (and ``gcloud``'s credential questions).

GKE and Compute are answered by the real gcloud against ``simcloud``'s emulated APIs over the
same state file, the cluster by the real kubectl against ``simcloud.kube``;
``simcloud.rehearsal.emulated_env`` starts them::

    scenario = load_scenario("scenario.yaml")
    init_state(scenario, state_file)
    write_shims(bin_dir)
    env = emulated_env(workdir, fake_cloud_env(bin_dir, state_file))   # run anything with it

Every stand-in answers with the real tool's JSON shapes, error texts and exit codes, and keeps
what it changes in the state file. ``docs/simulated-cloud.md`` describes the scenario format.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tpu_trainer.fakecloud.shims import fake_cloud_env, write_shims
from tpu_trainer.fakecloud.state import STATE_ENV, read_state, recorded_calls

if TYPE_CHECKING:
    from tpu_trainer.fakecloud.initial import init_state
    from tpu_trainer.fakecloud.scenario import Scenario, load_scenario, parse_scenario

# Each fake tool call is a new process that never reads a scenario: the scenario schema
# (pydantic) is imported only when a scenario is.
_LAZY = {
    "init_state": "tpu_trainer.fakecloud.initial",
    "Scenario": "tpu_trainer.fakecloud.scenario",
    "load_scenario": "tpu_trainer.fakecloud.scenario",
    "parse_scenario": "tpu_trainer.fakecloud.scenario",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "STATE_ENV",
    "Scenario",
    "fake_cloud_env",
    "init_state",
    "load_scenario",
    "parse_scenario",
    "read_state",
    "recorded_calls",
    "write_shims",
]
