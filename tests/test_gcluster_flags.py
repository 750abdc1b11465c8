"""The ``gcluster job submit`` flag model (``infra/gcluster_flags.yaml``) and its parser."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CONFIG, IRONWOOD, NOW
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.infra.gcluster_flags import check_gcluster_argv, load_model
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.recipes.resolve import Filters

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
GOOD = [
    "gcluster",
    "job",
    "submit",
    "--skip-prereqs",
    "--queue",
    "multislice-queue",
    "--cluster=demo-cluster",
    "--project",
    "demo-project",
    "-l",
    "us-central1-ai1a",
    "--priority",
    "medium",
    "--restarts",
    "0",
    "--compute-type",
    "tpu7x",
    "--topology",
    "4x4x4",
    "--num-slices",
    "2",
    "--image",
    "gcr.io/demo-project/maxtext-runner",
    "--mount",
    "gs://bucket;/tmp/dataset;ro",
    "--node-constraint",
    "cloud.google.com/placement-policy-name=p",
    "--verbose",
    "--name",
    "user-gemmoe-26b-20261122-0600",
    "--command",
    "python3 -m maxtext.trainers.pre_train.train maxtext/configs/base.yml steps=1",
]


def _without(argv: list[str], flag: str, takes_value: bool = True) -> list[str]:
    i = argv.index(flag)
    return argv[:i] + argv[i + 1 + takes_value :]


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    i = argv.index(flag)
    return [*argv[: i + 1], value, *argv[i + 2 :]]


def test_the_model_is_built_from_the_cobra_sources() -> None:
    model = load_model()
    assert len(model.commit) == 40
    assert model.command == ("gcluster", "job", "submit")
    assert model.name_max == 28
    required = sorted(f.name for f in model.flags.values() if f.required)
    assert required == ["command", "compute-type", "name"]
    assert model.flags["location"].short == "l"
    assert model.flags["num-slices"].kind == "int"
    assert model.flags["mount"].kind == "string-list"
    assert model.flags["gke-nap-provisioning"].choices == ("on-demand", "spot", "reservation")
    assumed = sorted(f.name for f in model.flags.values() if f.assumed)
    assert assumed == ["dry-run", "gke-namespace", "skip-prereqs"]
    assert ("one_of", ("image", "base-image")) in model.rules


def test_a_good_line_passes_and_names_its_assumed_flags() -> None:
    good = _with(GOOD, "--name", "user-gemmoe-26-20261122-0600")
    verdict = check_gcluster_argv(good)
    assert verdict.ok, verdict.problems
    assert verdict.values["num-slices"] == ("2",)
    assert verdict.values["verbose"] == ("true",)
    assert verdict.assumed == ("skip-prereqs",)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda a: a, "workload name cannot exceed 28 characters"),
        (lambda a: _with(a, "--name", "User_Name"), "is not a valid name"),
        (lambda a: _without(a, "--compute-type"), 'required flag(s) "compute-type" not set'),
        (lambda a: _with(a, "--num-slices", "two"), 'invalid argument "two" for "--num-slices"'),
        (lambda a: [*a, "--zone", "z"], "unknown flag: --zone"),
        (lambda a: [*a, "-z", "z"], "unknown shorthand flag: -z"),
        (lambda a: _without(a, "--image"), "either --image or --base-image must be provided"),
        (lambda a: [*a, "--build-context", "."], "--build-context cannot be provided with --image"),
        (lambda a: [*a, "--gke-nap-provisioning", "cheap"], "allowed values are on-demand"),
        (lambda a: [*a, "stray"], "takes flags only"),
        (lambda a: [*a, "--topology"], "flag needs an argument: --topology"),
    ],
)
def test_bad_lines_say_what_gcluster_would_refuse(change: object, problem: str) -> None:
    argv = change(GOOD)  # type: ignore[operator]
    verdict = check_gcluster_argv(argv)
    assert not verdict.ok
    assert any(problem in p for p in verdict.problems), verdict.problems


@pytest.mark.parametrize(
    ("folder", "variables"),
    [
        ("gemmoe-26b/4k-bf16-tpu7x-4x4x4", ()),
        ("densemoe-671b/4k-bf16-tpu7x-4x8x8-gcs", (("DATASET_BUCKET", "demo-data"),)),
    ],
)
def test_every_planned_gcluster_line_passes_the_model(
    folder: str, variables: tuple[tuple[str, str], ...]
) -> None:
    options = PlanOptions(user="a-rather-long-user-name", now=NOW, variables=variables)
    plan = plan_request(
        Request(str(IRONWOOD / folder), Filters(submitter="gcluster"), config_path=CONFIG), options
    )
    verdict = check_gcluster_argv(plan.xpk_argv("true"))
    assert verdict.ok, verdict.problems
    assert verdict.values["name"] == (plan.workload_name,)


_GO = """
func init() {
\tSubmitCmd.Flags().StringVarP(&imageName, "image", "i", "", "The image.")
\tSubmitCmd.Flags().IntVar(&restarts, "restarts", 1, "Restarts.")
\tSubmitCmd.Flags().BoolVar(&verbose, "verbose", false, "Verbose.")
\tSubmitCmd.Flags().StringVar(&mode, "mode", "", "Mode. Allowed values: fast, slow.")
\tSubmitCmd.Flags().StringToStringVar(&labels, "node-constraint", nil, "k=v pairs.")
\tJobCmd.PersistentFlags().StringVarP(&location, "location", "l", "", "Where.")
\t_ = SubmitCmd.MarkFlagRequired("image")
}
"""


def test_the_builder_reads_cobra_flag_definitions() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_gcluster_flags import flags_of
    finally:
        sys.path.pop(0)
    flags = flags_of(_GO)
    assert flags == {
        "image": {"kind": "string", "short": "i"},
        "location": {"kind": "string", "short": "l", "inherited": True},
        "mode": {"kind": "string", "choices": ["fast", "slow"]},
        "node-constraint": {"kind": "key-value"},
        "restarts": {"kind": "int", "default": 1},
        "verbose": {"kind": "bool"},
    }
