"""The ending rules every launch path shares, and the two budgets of a resumed run: the
cloud's word that capacity was taken back, Ray's SUCCEEDED short of the last step, a bare
--auto-resume, transient errors (the diagnosis marks them) apart from preemptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import new_run
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


SIGTERM = "I1122 04:30:00.5 1 train.py:1454] Training stopped: Job received termination signal (SIGTERM).\n"


def _failed() -> FollowedJob:
    return FollowedJob(
        end=JobEnd.FAILED,
        info=JobInfo(submission_id="job-1", status=JobStatus.FAILED),
        message="the job failed, driver exit code 1: ActorDiedError",
    )


def test_a_ray_job_that_failed_was_preempted_only_on_the_sigterm_line_or_the_clusters_word(
    tmp_path: Path,
) -> None:
    log = tmp_path / "worker0.log"
    log.write_text("".join(STEP.format(n=n) for n in range(7)), encoding="utf-8")
    asked: list[bool] = []

    def pods_lost() -> str:
        asked.append(True)
        return "TPU worker pod w-0 lost (DisruptionTarget, TerminationByKubelet)"

    assert judge_ending(_failed(), log, 20).end is JobEnd.FAILED  # the log just ends
    judged = judge_ending(_failed(), log, 20, taken_back=pods_lost)
    assert judged.end is JobEnd.INTERRUPTED and judged.cut is not None and asked
    assert judged.message.startswith("interrupted at step 6 of 20 (preempted: TPU worker pod w-0")
    assert judged.segment().retry and judged.segment().preempted
    log.write_text(log.read_text() + SIGTERM, encoding="utf-8")
    assert judge_ending(_failed(), log, 20).end is JobEnd.INTERRUPTED  # MaxText's own word
    # a later segment is judged by its own lines only
    start = log.stat().st_size
    log.write_text(log.read_text() + "".join(STEP.format(n=n) for n in range(7, 20)))
    asked.clear()
    assert judge_ending(_succeeded(), log, 20, start, taken_back=pods_lost).ok
    assert not asked  # a clean ending asks the cluster nothing


def test_a_failed_ray_job_retries_only_on_a_transient_diagnosis() -> None:
    reset = diagnose(["E1122 grpc.cc:12] UNAVAILABLE: Connection reset by peer"])[0]
    oom = diagnose(["RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.0G"])
    transient = FollowedJob(end=JobEnd.FATAL, info=None, message="reset", fatal=(reset,))
    assert transient.segment().retry and not transient.segment().preempted
    assert transient.segment().stored_cause == f"transient error: {reset.title}"
    fatal = FollowedJob(end=JobEnd.FATAL, info=None, message="oom", fatal=tuple(oom))
    assert not fatal.segment().retry and fatal.segment().stored_cause == "failed"
    hung = FollowedJob(end=JobEnd.HUNG, info=None, message="hung", fatal=(reset,))
    assert not hung.segment().retry  # a hang is never retried


def test_a_pod_kubernetes_took_away_says_why() -> None:
    from tpu_trainer.launchers.kuberay.lost_workers import lost_pod

    disrupted = {
        "metadata": {"name": "w-0"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
            ],
        },
    }
    assert (
        lost_pod(disrupted) == "TPU worker pod w-0 lost (DisruptionTarget, PreemptionByScheduler)"
    )
    shut = {"metadata": {"name": "w-1"}, "status": {"phase": "Failed", "reason": "NodeShutdown"}}
    assert lost_pod(shut) == "TPU worker pod w-1 lost (NodeShutdown)"
    fine = {"metadata": {"name": "w-2"}, "status": {"phase": "Failed", "reason": "Error"}}
    assert lost_pod(fine) is None
    assert lost_pod({"metadata": {"name": "w-3"}, "status": {"phase": "Running"}}) is None


def test_a_crashed_segment_is_ended_and_the_next_counts_what_it_left_to_redo(
    tmp_path: Path,
) -> None:
    from tpu_trainer.app.resume import FINISHED, SegmentBook
    from tpu_trainer.launch_path import LaunchPath
    from tpu_trainer.store.db import RunStore

    store = RunStore(tmp_path / "runs.db")
    new_run(
        store,
        "r1",
        LaunchPath.TPU_VM,
        "v6e-8",
        project="p",
        region="us-central1",
        zone="us-central1-a",
    )
    log = tmp_path / "worker0.log"
    book = SegmentBook(store, "r1", log)
    book.begin("us-central1-a")  # then the process dies at step 14, checkpoints every 10
    ckpt = "I1122 1 atomicity.py:852] Finished saving checkpoint (finalized tmp dir) to `g/10`.\n"
    text = "".join(STEP.format(n=n) + (ckpt if n == 10 else "") for n in range(15))
    log.write_text(text, encoding="utf-8")
    again = SegmentBook(store, "r1", log)
    again.pick_up()
    (first,) = store.segments("r1")
    assert (first.cause, first.last_step, first.durable_step) == ("crashed", 14, 10)
    assert again.wasted == 4 and again.n == 0
    again.begin("us-central1-a")
    again.on_line(STEP.format(n=11))
    second = store.segments("r1")[1]
    assert (second.n, second.wasted_steps) == (2, 4)
    # its process dies too; a third follows the same workload again: the open segment goes on
    third = SegmentBook(store, "r1", log)
    third.adopt()
    assert (third.n, third.start) == (2, log.stat().st_size)
    log.write_text(log.read_text() + "".join(STEP.format(n=n) for n in range(11, 20)))
    third.end(FINISHED)
    assert [(s.n, s.cause, s.last_step) for s in store.segments("r1")] == [
        (1, "crashed", 14),
        (2, None, 19),
    ]
    assert store.segments("r1")[1].ended_at is not None
    store.close()


def test_a_resumed_run_plans_again_under_the_name_it_already_has() -> None:
    from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT
    from tpu_trainer.app.plan_json import plan_json
    from tpu_trainer.app.planning import Request, plan_with_config
    from tpu_trainer.cli.resume_cmd import stored_plan
    from tpu_trainer.config.load import load_config
    from tpu_trainer.plan.plan import PlanOptions

    config = load_config(CONFIG)
    assert config is not None
    recipe = Request(str(RECIPES_ROOT / RECIPES["classic"]))
    first = plan_with_config(
        recipe, config, PlanOptions(user="ada", now=NOW, overrides=(("steps", "7"),))
    )
    again = stored_plan(config, plan_json(first))  # later, maybe by someone else
    assert again.workload_name == first.workload_name
    args = " ".join(again.expand(t) for t in again.program_arg_texts)
    assert f"run_name={first.workload_name}" in args  # so MaxText restores its checkpoints
    assert "steps=7" in args
