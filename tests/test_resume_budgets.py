"""The ending rules every launch path shares, and the two budgets of a resumed run: the
cloud's word that capacity was taken back, Ray's SUCCEEDED short of the last step, a bare
--auto-resume, transient errors (the diagnosis marks them) apart from preemptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.app.ending import Cause, cut_short
from tpu_trainer.app.resume import Budgets
from tpu_trainer.catalog.error_signatures import CatalogError, load_catalog
from tpu_trainer.cli.train_cmd import DEFAULT_RESUMES, with_bare_auto_resume
from tpu_trainer.frameworks.maxtext.ending import EndFacts
from tpu_trainer.infra.ray_jobs import JobInfo, JobStatus
from tpu_trainer.launchers.ray.follow import FollowedJob, JobEnd, judge_ending
from tpu_trainer.plan.diagnose import diagnose

pytestmark = pytest.mark.unit

STEP = "I1122 04:29:49.1 1 metric_logger.py:265] completed step: {n}, seconds: 2.7, loss: 9.1\n"


def test_a_vm_the_cloud_took_back_is_preempted_even_without_the_sigterm_line() -> None:
    cut = cut_short(EndFacts(last_step=12, durable_step=10), 50, cloud_says="VM is PREEMPTED")
    assert cut is not None and cut.cause is Cause.PREEMPTED and cut.resumable
    assert cut.message.startswith("interrupted at step 12 of 50 (preempted: VM is PREEMPTED)")
    assert cut_short(EndFacts(last_step=12), 50) is not None  # unfinished all the same
    assert cut_short(EndFacts(last_step=12), 50).cause is Cause.UNFINISHED  # type: ignore[union-attr]
    nothing = cut_short(EndFacts(), None, cloud_says="VM is PREEMPTED")
    assert nothing is not None and nothing.message.startswith("interrupted before its first step")


def _succeeded() -> FollowedJob:
    return FollowedJob(
        end=JobEnd.SUCCEEDED, info=JobInfo(submission_id="job-1", status=JobStatus.SUCCEEDED)
    )


def test_a_ray_job_that_succeeded_short_of_its_last_step_was_interrupted(tmp_path: Path) -> None:
    log = tmp_path / "worker0.log"
    log.write_text("".join(STEP.format(n=n) for n in range(5)), encoding="utf-8")
    judged = judge_ending(_succeeded(), log, 20)
    assert judged.end is JobEnd.INTERRUPTED and not judged.ok
    assert judged.message.startswith("interrupted at step 4 of 20 (the log ends before")
    assert judge_ending(_succeeded(), log, 5).ok  # step 4 is the last of 5


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["train", "r", "--auto-resume"], ["train", "r", f"--auto-resume={DEFAULT_RESUMES}"]),
        (["train", "--auto-resume", "r"], ["train", f"--auto-resume={DEFAULT_RESUMES}", "r"]),
        (["train", "--auto-resume", "2", "r"], ["train", "--auto-resume", "2", "r"]),
        (["train", "--auto-resume=0"], ["train", "--auto-resume=0"]),
    ],
)
def test_a_bare_auto_resume_means_the_default_budget(args: list[str], expected: list[str]) -> None:
    assert with_bare_auto_resume(args) == expected


def test_preemptions_and_transient_errors_draw_on_budgets_of_their_own() -> None:
    budgets = Budgets(preemptions=1, errors=1)
    assert budgets.take(preempted=True)
    assert not budgets.take(preempted=True)  # the preemption budget is spent
    assert budgets.take(preempted=False)  # the error budget is still there
    assert not budgets.take(preempted=False)


def test_the_diagnosis_marks_a_connection_reset_transient_and_an_oom_not() -> None:
    reset = "E1122 grpc.cc:12] UNAVAILABLE: Connection reset by peer (from /job:tpu_worker)"
    oom = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying"
    (found,) = diagnose([reset])
    assert (found.signature, found.transient) == ("tpu-connection-reset", True)
    assert not any(m.transient for m in diagnose([oom]))


def test_the_catalog_refuses_a_transient_flag_that_is_not_a_boolean() -> None:
    text = """
families: [{id: f, title: F, summary: S, cause: C, fix: F}]
signatures:
  - {id: s, family: f, transient: 'yes', needles: [x], patterns: [x], title: T, cause: C,
     fix: F, source: S}
"""
    with pytest.raises(CatalogError, match="transient must be true or false"):
        load_catalog(text)
