"""A KubeRay run, planned: the RayCluster (checked against KubeRay's CRD), the JaxTrainer entry
script (checked by Ray 2.60 itself), golden files for both."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import GOLDEN, RECIPES, check_golden, plan_for
from tpu_trainer.errors import InputError
from tpu_trainer.fakecloud import crd
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launchers.kuberay.manifests import (
    ACCELERATOR_LABEL,
    NAME_MAX,
    TOPOLOGY_LABEL,
    TPU_RESOURCE,
    KubeRayPlan,
    RaySettings,
    cluster_name,
    entry_path,
    image_of,
    kuberay_plan,
    manifest_yaml,
    raycluster,
)
from tpu_trainer.launchers.ray.entry import JaxScaling
from tpu_trainer.plan.naming import is_valid_workload_name
from tpu_trainer.plan.slices import Slice
from tpu_trainer.runtime.ray_runtime import install_ray

SETTINGS = RaySettings(image="us-docker.pkg.dev/demo-project/images/ray-maxtext:2.60.0")
RUN_ID = "0badc0de"
# (fixture recipe, slices): one host, and 16 hosts in two slices
CASES = {"classic": 1, "tee-upload": 2}


def _kplan(variant: str, **opts: Any) -> KubeRayPlan:
    plan = plan_for(RECIPES[variant], num_slices=CASES[variant], **opts)
    return kuberay_plan(plan, SETTINGS, RUN_ID)


@pytest.mark.unit
def test_resume_reads_the_image_back_from_the_runs_kept_manifest() -> None:
    manifest = manifest_yaml(_kplan("classic").objects)
    assert image_of(manifest) == SETTINGS.image
    assert image_of("kind: ConfigMap\n") is None
    assert image_of("kind: [unclosed\n") is None


@pytest.mark.parametrize("variant", sorted(CASES))
@pytest.mark.unit
def test_manifest_and_entry_script_match_their_golden_files(
    variant: str, update_golden: bool
) -> None:
    kplan = _kplan(variant)
    manifest = manifest_yaml(kplan.objects)
    assert list(yaml.safe_load_all(manifest)) == list(kplan.objects)
    check_golden(GOLDEN / "kuberay" / f"raycluster_{variant}.yaml", manifest, update_golden)
    check_golden(
        GOLDEN / "kuberay" / f"train_entry_{variant}.py.golden", kplan.entry_script, update_golden
    )


@pytest.mark.parametrize("variant", sorted(CASES))
@pytest.mark.unit
def test_the_raycluster_is_valid_against_kuberays_crd(variant: str) -> None:
    kplan = _kplan(variant)
    assert crd.validate(kplan.cluster, folder=crd.crd_dir()) == []


@pytest.mark.unit
def test_the_worker_group_is_the_slice_hosts_by_slices() -> None:
    plan = plan_for(RECIPES["tee-upload"], num_slices=2)  # tpu7x-4x4x4: 64 chips, 16 hosts
    cluster = kuberay_plan(plan, SETTINGS, RUN_ID).cluster
    (group,) = cluster["spec"]["workerGroupSpecs"]
    assert (group["numOfHosts"], group["replicas"]) == (16, 2)
    assert group["minReplicas"] == group["maxReplicas"] == 2
    pod = group["template"]["spec"]
    assert pod["nodeSelector"] == {ACCELERATOR_LABEL: "tpu7x", TOPOLOGY_LABEL: "4x4x4"}
    resources = pod["containers"][0]["resources"]
    assert resources["requests"][TPU_RESOURCE] == resources["limits"][TPU_RESOURCE] == "4"
    assert cluster["spec"]["authOptions"] == {"mode": "token"}
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert head["volumes"][0]["configMap"]["name"] == f"{cluster['metadata']['name']}-entry"
    assert TPU_RESOURCE not in json.dumps(head)


@pytest.mark.unit
def test_a_mistake_in_the_manifest_is_caught_by_the_crd() -> None:
    cluster = _kplan("classic").cluster
    cluster["spec"]["workerGroupSpecs"][0]["numOfHost"] = 1  # typo
    assert any("numOfHost" in e for e in crd.validate(cluster, folder=crd.crd_dir()))


@pytest.mark.unit
def test_the_entry_script_carries_arguments_as_literals_never_through_a_shell() -> None:
    odd = 'a "red" fox; $(rm -rf /) `x` \\ done'
    kplan = _kplan("classic", overrides=(("prompt", odd),))
    assert kplan.entrypoint == f"python {entry_path()}"
    tree = ast.parse(kplan.entry_script)
    values = {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name) and t.id in ("ARGS", "WORKER_ENV", "MODULE")
    }
    assert f"prompt={odd}" in values["ARGS"]
    assert values["MODULE"] == "MaxText.train"  # the recipe's own entry module
    assert values["WORKER_ENV"]["JAX_PLATFORMS"] == "tpu"


@pytest.mark.unit
def test_names_are_short_valid_and_carry_the_run() -> None:
    name = cluster_name("0badc0de", "A Very_Long Model Name With Words 405B Instruct")
    assert len(name) <= NAME_MAX and is_valid_workload_name(name)
    assert name.startswith("tpt-0badc0de-")


@pytest.mark.unit
def test_a_cpu_slice_cannot_become_a_raycluster() -> None:
    with pytest.raises(InputError, match="no GKE TPU node label"):
        raycluster("x", Slice.parse("cpu-1"), 1, SETTINGS, RUN_ID)
    with pytest.raises(InputError, match="not a TPU slice Ray Train can schedule"):
        JaxScaling.for_slice(Slice.parse("cpu-1"), 1)


_CHECK = """
import json, runpy, sys
found = {}
for path in sys.argv[1:]:
    module = runpy.run_path(path, run_name="not_main")
    s = module["scaling_config"]()
    r = module["run_config"]()
    found[path] = {"num_workers": s.num_workers, "topology": s.topology,
                   "accelerator_type": s.accelerator_type, "use_tpu": s.use_tpu,
                   "tpu": s.num_tpus_per_worker, "run": r.name}
print(json.dumps(found))
"""


@pytest.mark.runtime
def test_ray_2_60_accepts_the_entry_scripts_scaling_config(tmp_path: Path) -> None:
    python = install_ray(SubprocessRunner(), lambda _: None)
    scripts = {}
    for variant in CASES:
        path = tmp_path / f"{variant}.py"
        path.write_text(_kplan(variant).entry_script)
        scripts[variant] = str(path)
    proc = subprocess.run(
        [str(python), "-c", _CHECK, *scripts.values()],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    classic, moe = found[scripts["classic"]], found[scripts["tee-upload"]]
    assert classic == {
        "num_workers": 1,
        "topology": "2x2x1",
        "accelerator_type": "TPU-V7X",
        "use_tpu": True,
        "tpu": 4,
        "run": classic["run"],
    }
    assert (moe["num_workers"], moe["topology"], moe["tpu"]) == (32, "4x4x4", 4)
