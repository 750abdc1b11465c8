"""Options shared by several commands."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.report.model import ReportLang

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Configuration file (default: $TPU_TRAINER_CONFIG, then "
        "~/.config/tpu-trainer/config.yaml).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
PrecisionOpt = Annotated[
    str | None, typer.Option("--precision", help="bf16 or fp8 (for a model name).")
]
TopologyOpt = Annotated[
    str | None, typer.Option("--topology", help="e.g. 4x8x8 (for a model name).")
]
SeqOpt = Annotated[str | None, typer.Option("--seq", help="e.g. 4k (for a model name).")]
VariantOpt = Annotated[
    str | None,
    typer.Option("--variant", help="e.g. gcs, lustre, or plain for none (for a model name)."),
]
SubmitterOpt = Annotated[
    str | None,
    typer.Option(
        "--submitter",
        help="xpk or gcluster: read the recipe folder's xpk/ or cluster_toolkit/ variant "
        "(default: the configuration's `submitter`, else the one the folder has; xpk if both).",
    ),
]
RequestArg = Annotated[
    str,
    typer.Argument(
        help="A recipe folder (…/<seq>-<precision>-tpu7x-<topology>, with or without xpk/), its "
        "run_recipe.sh, or a model name looked up under tpu_recipes_path."
    ),
]
RehearseOpt = Annotated[
    Path | None,
    typer.Option(
        "--rehearse",
        help="Run against a fake cloud described by this scenario file (docs/simulated-cloud.md); "
        "nothing reaches Google Cloud.",
    ),
]


class Backend(StrEnum):
    """Where ``train`` runs a recipe."""

    GKE = "gke"
    LOCAL = "local"
    TPU_VM = "tpu-vm"
    KUBERAY = "kuberay"

    @property
    def launch_path(self) -> LaunchPath:
        """The launch path a run of this backend takes, as the run store records it (a run on
        GKE is recorded as ``xpk``, the tool it goes through)."""
        return LaunchPath.XPK if self is Backend.GKE else LaunchPath(self.value)


BackendOpt = Annotated[
    Backend | None,
    typer.Option(
        "--backend",
        help="gke (TPUs through xpk; its runs are recorded as xpk), kuberay (a RayCluster running a Ray Train JaxTrainer job), "
        "tpu-vm (a TPU VM made for the run) or local (MaxText on this machine's CPU). "
        "Default: local for cpu-1 recipes, gke otherwise.",
    ),
]
ScaleDownOpt = Annotated[
    bool,
    typer.Option(
        "--scale-down",
        help="With --backend local: run a TPU recipe's arguments on this CPU with the model "
        "shrunk (same family, a few layers, synthetic data, ~1 minute): a smoke test before "
        "using TPUs.",
    ),
]
LangOpt = Annotated[
    ReportLang,
    typer.Option("--lang", help="Language of the README report's headings: zh (seed) or en."),
]
