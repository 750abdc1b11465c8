"""The environment that keeps real xpk (its own Google client libraries, its downloads) on
this machine in a rehearsal: every variable a rehearsal's xpk needs besides gcloud's
(``gcloud_env``) and kubectl's (``KUBECONFIG``), in one place.

- xpk 1.16 makes Google Cloud clients of its own beside its gcloud calls: a Cloud Storage
  client after every ``workload create`` (to grant the workload's service account access to
  its buckets; none for the tool's workloads, so it makes no request) and, without
  ``--project-number`` (the tool always passes it), a Cloud Resource Manager client over gRPC.
  Making one needs Application Default Credentials and a project: a credentials file under the
  rehearsal folder whose token endpoint is the emulator (no refresh token reaches Google; the
  emulator accepts no secret), and the scenario's project.
- xpk downloads kubectl, kubectl-kueue and crane from dl.k8s.io and github.com into its cache
  before a command unless ``DEPENDENCY_AUTO_DOWNLOAD=false``; its cache (``XPK_CACHE_HOME``) is
  the rehearsal's own, so a kubectl the user's xpk downloaded is not put first on PATH.
- ``TELEMETRY_ENABLED=false``: xpk sends no usage records.
- The APIs gcloud is sent to that are not emulated (Storage, Logging, IAM) are pointed at the
  emulator as well, so such a call is answered here (a 404), never by Google.
"""

from __future__ import annotations

import json
from pathlib import Path

from tpu_trainer.infra.files import atomic_write

NOT_EMULATED = ("STORAGE", "LOGGING", "IAM")
"""gcloud's endpoint override names of APIs xpk's commands reach that the emulator lacks."""
OFFLINE_XPK = {"DEPENDENCY_AUTO_DOWNLOAD": "false", "TELEMETRY_ENABLED": "false"}
"""xpk's own switches for a run that downloads nothing and reports nothing."""


def client_env(base_url: str, config_dir: Path, project: str) -> dict[str, str]:
    """Variables to add for xpk (``base_url``: the Google emulator's, no trailing /;
    ``config_dir``: where to keep the credentials file and xpk's cache)."""
    config_dir.mkdir(parents=True, exist_ok=True)
    adc = config_dir / "application_default_credentials.json"
    credentials = {
        "type": "authorized_user",
        "client_id": "simulated-client",
        "client_secret": "simulated",
        "refresh_token": "simulated",
        "token_uri": f"{base_url}/token",
    }
    atomic_write(adc, json.dumps(credentials, indent=2), mode=0o600, sync=False)
    overrides = {
        f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{api}": f"{base_url}/{api.lower()}/"
        for api in NOT_EMULATED
    }
    return {
        "GOOGLE_APPLICATION_CREDENTIALS": str(adc),
        "GOOGLE_CLOUD_PROJECT": project,
        "XPK_CACHE_HOME": str(config_dir / "xpk-cache"),
        **OFFLINE_XPK,
        **overrides,
    }
