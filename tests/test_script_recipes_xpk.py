"""xpk's own parser on the ``xpk workload create`` of README recipes that submit a training
script (the README's flags: ``--tpu-type``, ``--docker-image`` or ``--base-docker-image``)."""

from __future__ import annotations

import pytest

from conftest import plan_for
from tpu_trainer.infra.xpk_parser import check_xpk_argvs
from tpu_trainer.plan.scripts import submitted_argv

READMES = (
    "training/v5p/Dense7B-Script",
    "training/v5p/Sized-175B-Script",
    "training/v5p/MoE-8x7B-Script",
    "training/v5p/DiffusionXL-Script",
)


@pytest.mark.xpk
@pytest.mark.runtime
def test_xpk_parser_accepts_the_readme_recipes_workload_create() -> None:
    argvs = [submitted_argv(plan_for(readme)) for readme in READMES]
    results = check_xpk_argvs(argvs)
    assert [r["ok"] for r in results] == [True] * len(READMES), results
    for argv, result in zip(argvs, results, strict=True):
        args = result["args"]
        assert isinstance(args, dict)
        assert args["command"] == next(a for a in argv if a.startswith("--command="))[10:]
