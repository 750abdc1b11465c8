"""A rehearsal's cluster: the real kubectl against the Kubernetes API emulator, through a
kubeconfig under the rehearsal folder that each process rewrites for its own port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import cli_env
from tpu_trainer.infra.kubectl import KubectlMissingError, find_kubectl
from tpu_trainer.simcloud.rehearsal import KUBECONFIG, prepare

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
CONTEXT = "gke_demo-project_us-central1_demo-cluster"


def _kubectl(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", *argv], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _server(workdir: Path) -> str:
    config = yaml.safe_load((workdir / KUBECONFIG).read_text(encoding="utf-8"))
    return str(config["clusters"][0]["cluster"]["server"])


def test_the_real_kubectl_reaches_the_rehearsal_cluster_and_a_later_process_rewrites_it(
    tmp_path: Path,
) -> None:
    base = cli_env(tmp_path)
    _, env, workdir = prepare(SCENARIOS / "failover.yaml", None, base, fresh=True)
    assert env["KUBECONFIG"] == str(workdir / KUBECONFIG)
    assert Path(env["KUBECACHEDIR"]).is_relative_to(workdir)
    assert not (workdir / "bin" / "kubectl").exists()  # the stand-in is not on PATH
    assert find_kubectl(env) != str(workdir / "bin" / "kubectl")
    context = _kubectl(env, "config", "current-context")
    assert context.stdout.strip() == CONTEXT, context.stderr
    first = _server(workdir)
    created = _kubectl(env, "create", "configmap", "kept", "--from-literal=a=1")
    assert created.returncode == 0, created.stderr

    # cleanup/gc after a crash: a new process, a new port, the same cluster
    _, again, _ = prepare(SCENARIOS / "failover.yaml", None, base, fresh=False)
    assert _server(workdir) != first
    got = _kubectl(again, "get", "configmap", "kept", "-o", "json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["data"] == {"a": "1"}
    assert list((workdir / "kube" / "cache").iterdir()), "kubectl's cache stays in the folder"


def test_a_missing_kubectl_names_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(KubectlMissingError) as err:
        find_kubectl({"PATH": str(tmp_path)})
    assert "kubectl is not installed" in str(err.value)
    assert "https://kubernetes.io/docs/tasks/tools/" in str(err.value.fix)
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    (stand_in / "kubectl").write_text("#!/bin/sh\n", encoding="utf-8")
    (stand_in / "kubectl").chmod(0o755)
    with pytest.raises(KubectlMissingError):
        find_kubectl({"PATH": str(stand_in)}, skip=stand_in)
