"""The environment that points the real gcloud at the emulated APIs.

A private configuration directory per run (nothing of the user's gcloud setup is read or
changed), endpoint overrides for each emulated API, and a token file: gcloud then sends
``Authorization: Bearer <token>`` without any login, and never prompts.
"""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.infra.gcloud_parser import sdk_root

TOKEN = "simulated-access-token"  # noqa: S105 (accepted by the emulator only)


def require_gcloud() -> str:
    """The real gcloud on PATH, or an error naming how to install it."""
    return str(sdk_root() / "bin" / "gcloud")


def gcloud_env(base_url: str, config_dir: Path, *, signed_in: bool = True) -> dict[str, str]:
    """Variables to add to a gcloud child's environment (``base_url`` has no trailing /).
    ``signed_in=False``: no credentials, so gcloud refuses every API call as it does when no
    account is active."""
    config_dir.mkdir(parents=True, exist_ok=True)
    token = config_dir / "access-token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    signed = {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token)} if signed_in else {}
    return {
        "CLOUDSDK_CONFIG": str(config_dir),
        **signed,
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER": f"{base_url}/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": f"{base_url}/compute/beta/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": f"{base_url}/tpu/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER": f"{base_url}/cloudresourcemanager/",
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_MONITORING": f"{base_url}/monitoring/",
    }
