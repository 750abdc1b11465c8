"""A rehearsal's cluster: the real kubectl against the Kubernetes API emulator over HTTPS,
through the kubeconfig the real ``gcloud container clusters get-credentials`` writes under the
rehearsal folder from the emulated GKE cluster (its endpoint, its CA, the
``gke-gcloud-auth-plugin`` user), fetched by the tool once per process."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cli_env
from tpu_trainer.fakecloud.state import recorded_calls
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.kubectl import KubectlMissingError, find_kubectl
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.simcloud.rehearsal import KUBE_PKI, KUBECONFIG, PLUGIN_TOKEN_ENV, prepare

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
CONTEXT = "gke_demo-project_us-central1_demo-cluster"


def _kubectl(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", *argv], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _config(workdir: Path) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((workdir / KUBECONFIG).read_text(encoding="utf-8"))
    return config


def _credentials(env: dict[str, str]) -> list[CommandResult]:
    """What the tool does before its first kubectl command: get-credentials, once."""
    ran: list[CommandResult] = []
    access = KubeAccess("demo-project", "us-central1", "demo-cluster")
    runner = SubprocessRunner(env=env, recorder=ran.append)
    access.ensure(runner)
    access.ensure(runner)
    return ran


def test_get_credentials_writes_the_kubeconfig_kubectl_reaches_the_cluster_with_over_tls(
    tmp_path: Path,
) -> None:
    base = cli_env(tmp_path)
    _, env, workdir = prepare(SCENARIOS / "failover.yaml", None, base, fresh=True)
    assert env["KUBECONFIG"] == str(workdir / KUBECONFIG)
    assert not (workdir / KUBECONFIG).exists()  # until get-credentials writes it
    assert Path(env["KUBECACHEDIR"]).is_relative_to(workdir)
    assert not (workdir / "bin" / "kubectl").exists()  # the stand-in is not on PATH
    assert find_kubectl(env) != str(workdir / "bin" / "kubectl")
    (fetched,) = _credentials(env)
    assert fetched.argv[:4] == ("gcloud", "container", "clusters", "get-credentials")
    assert "kubeconfig entry generated for demo-cluster." in fetched.stderr
    config = _config(workdir)
    assert config["current-context"] == CONTEXT
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://127.0.0.1:")
    ca = base64.b64decode(cluster["certificate-authority-data"])
    assert ca == (workdir / KUBE_PKI / "ca.crt").read_bytes()
    user = config["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin" and "token" not in user
    first = cluster["server"]
    created = _kubectl(env, "create", "configmap", "kept", "--from-literal=a=1")
    assert created.returncode == 0, created.stderr
    # without the token in the environment the plugin asks gcloud (through the shim) for it
    calls = len(recorded_calls(workdir / "state.json"))
    by_gcloud = {k: v for k, v in env.items() if k != PLUGIN_TOKEN_ENV}
    asked = _kubectl(by_gcloud, "get", "configmap", "kept", "-o", "name")
    assert asked.stdout.strip() == "configmap/kept", asked.stderr
    assert len(recorded_calls(workdir / "state.json")) == calls  # no API call, none recorded

    # cleanup/gc after a crash: a new process, a new port, the same cluster and CA
    _, again, _ = prepare(SCENARIOS / "failover.yaml", None, base, fresh=False)
    assert _credentials(again)
    assert _config(workdir)["clusters"][0]["cluster"]["server"] != first
    assert (
        base64.b64decode(_config(workdir)["clusters"][0]["cluster"]["certificate-authority-data"])
        == ca
    )
    got = _kubectl(again, "get", "configmap", "kept", "-o", "json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["data"] == {"a": "1"}
    assert list((workdir / "kube" / "cache").iterdir()), "kubectl's cache stays in the folder"


def test_the_cluster_answers_only_its_token_and_kubectl_checks_its_certificate(
    tmp_path: Path,
) -> None:
    _, env, workdir = prepare(SCENARIOS / "failover.yaml", None, cli_env(tmp_path), fresh=True)
    _credentials(env)
    config = _config(workdir)
    config["users"][0]["user"] = {"token": "someone-elses-token"}
    (tmp_path / "wrong-token").write_text(yaml.safe_dump(config), encoding="utf-8")
    refused = _kubectl({**env, "KUBECONFIG": str(tmp_path / "wrong-token")}, "get", "nodes")
    assert refused.returncode == 1
    assert "error: You must be logged in to the server" in refused.stderr
    config = _config(workdir)
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    (tmp_path / "no-ca").write_text(yaml.safe_dump(config), encoding="utf-8")
    untrusted = _kubectl({**env, "KUBECONFIG": str(tmp_path / "no-ca")}, "get", "nodes")
    assert untrusted.returncode == 1
    assert "certificate signed by unknown authority" in untrusted.stderr


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
