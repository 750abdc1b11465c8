"""The launch paths a run can take, named as the run store records them."""

from __future__ import annotations

from enum import StrEnum


class LaunchPath(StrEnum):
    """Where a run ran: the value is what the store's ``runs.launcher`` column holds."""

    XPK = "xpk"
    """GKE, through xpk (``train --backend gke``)."""
    TPU_VM = "tpu-vm"
    KUBERAY = "kuberay"
    LOCAL = "local"
    """MaxText on this machine's CPU."""
    RAY = "ray"
    """A Ray job on a Ray head on this machine."""
