"""kubectl's way into the configured GKE cluster: ``gcloud container clusters get-credentials``,
run by the tool once per process, before its first kubectl command.

get-credentials asks GKE for the cluster's endpoint and CA and writes them into the kubeconfig
(``$KUBECONFIG``, else ``~/.kube/config``) as the current context
``gke_<project>_<region>_<cluster>``, with a user that runs ``gke-gcloud-auth-plugin`` for a
token of gcloud's account. The tool's kubectl commands then reach the cluster named in the
configuration, not whatever context was current; xpk runs the same command for its own calls.
It changes nothing in the cloud, so a dry run runs it too. A rehearsal's kubeconfig is written
the same way, against the emulated GKE API (``docs/simulated-cloud.md``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import LOGIN_FIX, NOT_LOGGED_IN, CommandFailed, CommandRunner

PLUGIN_MISSING = "gke-gcloud-auth-plugin, which is needed for continued use of kubectl"
"""What gcloud prints (exit 0) when the kubeconfig's auth plugin is not installed."""
PLUGIN_INSTALL = (
    "install it: `gcloud components install gke-gcloud-auth-plugin`, or the "
    "google-cloud-cli-gke-gcloud-auth-plugin package where gcloud came from apt or yum "
    "(https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl)"
)


class ClusterAccessError(TpuTrainerError):
    """kubectl cannot be given credentials for the cluster."""


@dataclass(eq=False)
class KubeAccess:
    """The cluster kubectl is to reach; :meth:`ensure` fetches its credentials once."""

    project: str
    region: str
    cluster: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _done: bool = False

    @property
    def argv(self) -> list[str]:
        return [
            "gcloud",
            "container",
            "clusters",
            "get-credentials",
            self.cluster,
            f"--location={self.region}",
            f"--project={self.project}",
        ]

    @property
    def context(self) -> str:
        """The kubeconfig context get-credentials makes current."""
        return f"gke_{self.project}_{self.region}_{self.cluster}"

    def ensure(self, runner: CommandRunner) -> None:
        """Run get-credentials through ``runner`` unless it already ran in this process (other
        threads wait for the first); raises :class:`ClusterAccessError` naming the fix."""
        with self._lock:
            if self._done:
                return
            result = runner.run(self.argv, timeout=300)
            if not result.ok:
                text = result.text()
                raise CommandFailed(
                    result,
                    fix=LOGIN_FIX
                    if NOT_LOGGED_IN in text
                    else f"check cluster_name, region and project_id in the configuration "
                    f"(`gcloud container clusters list --project={self.project}` lists the "
                    "clusters you can reach)",
                )
            if PLUGIN_MISSING in result.text():
                raise ClusterAccessError(
                    "gke-gcloud-auth-plugin is not installed: kubectl needs it to sign in to "
                    f"GKE cluster {self.cluster}",
                    fix=PLUGIN_INSTALL,
                )
            self._done = True
