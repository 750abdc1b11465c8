"""The ``ray:`` part of a scenario: how the Ray head of a RayCluster the tool makes behaves in a
rehearsal (``train --backend kuberay --rehearse``): whether it gets ready, what the Ray job
prints and how it ends (docs/simulated-cloud.md, "KubeRay")."""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from tpu_trainer.fakecloud.maxtext_log import DEFAULT_LOG
from tpu_trainer.fakecloud.schema import (
    Flag,
    MaybeCount,
    base_dir,
    keys,
    one_of,
    problem,
    text_or_file,
)

ENDINGS = ("succeeded", "failed", "preempted")


def _log(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise problem("expected MaxText's log text")
    return value


@dataclass(frozen=True, slots=True)
class RayScenario:
    ends: Annotated[str, BeforeValidator(one_of(ENDINGS))] = "succeeded"
    """How the run's first Ray job ends: ``succeeded`` (worker 0 reaches the run's last
    step), ``failed`` (its entrypoint exits 1 after the log), ``preempted`` (the slice under
    the RayCluster is reclaimed after ``after_step``; the next job, on a RayCluster made again,
    restores the last durable checkpoint and succeeds)."""
    after_step: MaybeCount = None
    """With ``ends: preempted``: the last step logged before the slice goes."""
    log: Annotated[str, BeforeValidator(_log)] = DEFAULT_LOG
    """Worker 0's MaxText log (carried on to the run's last step when it succeeds)."""
    head_ready: Flag = True
    """False: the head pod never gets ready (the run fails after its head timeout)."""
    replace_ended_workers: Flag = False
    """True: the operator deletes and makes again a worker pod that ended, as KubeRay does."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any, info: ValidationInfo) -> Any:
        known = ("ends", "after_step", "log", "log_file", "head_ready", "replace_ended_workers")
        data = keys(data, known, optional=True)
        return text_or_file(data, "log", base_dir(info)) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _step(self) -> Self:
        if self.ends == "preempted" and self.after_step is None:
            raise problem("`ends: preempted` needs the step the slice goes after", "after_step")
        if self.ends != "preempted" and self.after_step is not None:
            raise problem(f"only with `ends: preempted` (ends is {self.ends})", "after_step")
        return self
