"""A rehearsal's Google Cloud: the emulated APIs over the scenario's state file, in this process.

``prepare`` lays out the fake cloud (``fakecloud.rehearsal.prepare``), starts the emulators
(GKE, Compute and TPU; the cluster's Kubernetes API) over the state file in daemon threads
bound to 127.0.0.1, and returns the environment to run with: the real gcloud pointed at the
Google emulator (a private configuration under the rehearsal folder), the ``gcloud`` shim
first on PATH, which hands the real gcloud everything but what is no API (``tpu-vm
ssh``/``scp``) and the credential questions, and ``KUBECONFIG`` under the rehearsal folder
(the user's ``~/.kube`` is never read), which the real ``gcloud container clusters
get-credentials`` writes when the tool runs it: the emulated GKE cluster's endpoint and CA are
the Kubernetes emulator's (HTTPS, the rehearsal's CA and access token).

``train --rehearse`` and a later ``cleanup``/``gc`` each start their own emulators over the
same state file, so they see one cloud; a killed ``train`` leaves its pools and workloads in
the file. Each process listens on new ports, and its get-credentials writes the kubeconfig
for them.
Exchanges that break the discovery documents are appended to ``PROBLEMS`` in the folder.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from tpu_trainer.config.model import Config
from tpu_trainer.fakecloud.gcloud_dispatch import REAL_GCLOUD_ENV
from tpu_trainer.fakecloud.rehearsal import prepare as prepare_fake_cloud
from tpu_trainer.fakecloud.state import read_state, transaction
from tpu_trainer.infra.gcloud_parser import GcloudSdkMissingError
from tpu_trainer.infra.kubectl import find_kubectl
from tpu_trainer.simcloud.client_env import client_env
from tpu_trainer.simcloud.egress import egress_env
from tpu_trainer.simcloud.gcloud_env import TOKEN, gcloud_env
from tpu_trainer.simcloud.kube import server as kube_server
from tpu_trainer.simcloud.kube.pki import server_pki
from tpu_trainer.simcloud.project_apis import Monitoring, ResourceManager
from tpu_trainer.simcloud.registry import registry_server
from tpu_trainer.simcloud.server import Emulator, Exchange, Service
from tpu_trainer.simcloud.state_compute import StateCompute
from tpu_trainer.simcloud.state_gke import StateGke
from tpu_trainer.simcloud.tpu import Tpu
from tpu_trainer.simcloud.tpu_state import file_state

PROBLEMS = "emulator-problems.jsonl"
"""Under the rehearsal folder: one JSON line per exchange the schemas found wrong."""
KUBECONFIG = Path("kube") / "config"
"""Under the rehearsal folder: the kubeconfig that points kubectl at the cluster's emulator."""
PLUGIN_TOKEN_ENV = "CLOUDSDK_AUTH_ACCESS_TOKEN"  # noqa: S105 (a variable name)
"""The account's token, as gke-gcloud-auth-plugin takes it without asking gcloud: with only
gcloud's token file it would run ``gcloud config config-helper`` for every kubectl command (a
token file has no expiry, so the plugin caches nothing), about a second each."""
KUBE_PKI = Path("kube") / "pki"
"""Under the rehearsal folder: the cluster's CA and its API server's certificate."""


def services(state: Path) -> Sequence[Service]:
    """The emulated APIs over the state file at ``state``."""
    return (
        StateGke(state),
        StateCompute(state),
        Tpu(file_state(state)),
        ResourceManager(state),
        Monitoring(state),
    )


def real_gcloud(env: dict[str, str], shim_dir: Path) -> str:
    """The installed gcloud (not the shim), or an error naming how to install it."""
    path = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != shim_dir
    )
    found = shutil.which("gcloud", path=path)
    if found is None:
        raise GcloudSdkMissingError(
            "gcloud is not installed: a rehearsal runs the real gcloud against emulated APIs",
            fix="install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install)",
        )
    return found


def _keeper(path: Path) -> Callable[[Exchange], None]:
    lock = threading.Lock()

    def keep(exchange: Exchange) -> None:
        if not (exchange.request_problems or exchange.response_problems):
            return
        line = json.dumps(
            {
                "method": exchange.method_id,
                "http": f"{exchange.http_method} {exchange.path}",
                "status": exchange.status,
                "request": list(exchange.request_problems),
                "response": list(exchange.response_problems),
            }
        )
        with lock, path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    return keep


def start_emulator(workdir: Path) -> Emulator:
    """Serve the emulated APIs over ``workdir/state.json`` until this process ends."""
    emulator = Emulator(services(workdir / "state.json"))
    emulator.on_exchange = _keeper(workdir / PROBLEMS)
    emulator.start()
    return emulator


def kube_env(workdir: Path) -> dict[str, str]:
    """Start the cluster's Kubernetes API emulator over ``workdir/state.json`` (until this
    process ends, or it has been idle a while): HTTPS with the rehearsal's CA, answering only
    the rehearsal's access token. The emulated GKE cluster's ``endpoint`` and
    ``masterAuth.clusterCaCertificate`` become this server's, so ``gcloud container clusters
    get-credentials`` (which the tool runs before its first kubectl call) writes the kubeconfig
    that reaches it. Returns ``KUBECONFIG`` (where get-credentials writes; a stale one of an
    earlier process is removed) and kubectl's discovery cache folder, both under ``workdir``."""
    state_path = workdir / "state.json"
    cluster = str(read_state(state_path)["cluster"]["name"])
    pki = server_pki(workdir / KUBE_PKI, cluster)
    server = kube_server.start(state_path, pki=pki, token=TOKEN)
    with transaction(state_path) as state:
        state["cluster"]["endpoint"] = server.endpoint
        state["cluster"]["ca_data"] = pki.ca_data
    config = workdir / KUBECONFIG
    config.unlink(missing_ok=True)
    return {"KUBECONFIG": str(config), "KUBECACHEDIR": str(config.parent / "cache")}


def emulated_env(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` (a fake-cloud environment) with the emulators started and gcloud and kubectl
    pointed at them (an error naming how to install either when it is missing)."""
    real = real_gcloud(env, workdir / "bin")
    find_kubectl(env, skip=workdir / "bin")
    emulator = start_emulator(workdir)
    state = read_state(workdir / "state.json")
    signed_in = bool(state.get("account"))
    project = str(state["project"])
    return {
        **env,
        **gcloud_env(emulator.base_url, workdir / "gcloud-config", signed_in=signed_in),
        **client_env(emulator.base_url, workdir / "gcloud-config", project),
        **kube_env(workdir),
        **({PLUGIN_TOKEN_ENV: TOKEN} if signed_in else {}),
        **egress_env(workdir, registry_server(workdir / "state.json"), env),
        "CLOUDSDK_CORE_PROJECT": project,
        REAL_GCLOUD_ENV: real,
    }


def prepare(
    scenario_path: Path, user: Config | None, env: dict[str, str], *, fresh: bool
) -> tuple[Config, dict[str, str], Path]:
    """``fakecloud.rehearsal.prepare``, then the emulated APIs started for the run."""
    config, fake_env, workdir = prepare_fake_cloud(scenario_path, user, env, fresh=fresh)
    return config, emulated_env(workdir, fake_env), workdir


def recorded_problems(workdir: Path) -> list[dict[str, object]]:
    """The invalid exchanges a rehearsal's emulators recorded (none when all was valid)."""
    path = workdir / PROBLEMS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
