"""Emulated Cloud Resource Manager (``cloudresourcemanager`` v1) and Cloud Monitoring
(``monitoring`` v1), for what the tool and xpk ask of them about the scenario's project.

- ``projects.get`` (``gcloud projects describe``): the project, with its number. The tool
  reads the number once per run and hands it to xpk (``--project-number``), which otherwise
  asks Resource Manager itself over gRPC. Any other project is Resource Manager's 403 (it
  answers the same for a project that does not exist and one the caller may not see).
- ``projects.dashboards.list`` (``gcloud monitoring dashboards list``, which xpk runs after
  every ``workload create`` to print a link to the TPU dashboard): the project has none.

Both only read the state file (the project and its number), so neither moves the scenario's
clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.fakecloud.state import State, project_number, read_state
from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import ApiError, Call, handler_for

_CREATED = "2024-03-05T17:42:10.418Z"
"""When the scenario's project was made (long before any rehearsal)."""


def _denied(permission: str, resource: str) -> ApiError:
    return ApiError(
        403,
        f"Permission '{permission}' denied on resource '{resource}' (or it may not exist).",
    )


@dataclass
class ResourceManager:
    """``cloudresourcemanager`` v1 ``projects.get`` over the state file at ``path``."""

    path: Path
    prefix: str = "/cloudresourcemanager/"
    apis: Sequence[DiscoveryApi] = field(
        default_factory=lambda: (load_api("cloudresourcemanager.v1"),)
    )

    def handle(self, call: Call) -> JsonObject:
        handler = handler_for({"projects.get": self._get}, call.method.id, "cloudresourcemanager.")
        return handler(read_state(self.path), call)

    def _get(self, state: State, call: Call) -> JsonObject:
        wanted = call.params["projectId"]
        if wanted != state["project"]:
            raise ApiError(403, "The caller does not have permission")
        return {
            "projectNumber": project_number(state),
            "projectId": wanted,
            "lifecycleState": "ACTIVE",
            "name": wanted,
            "createTime": _CREATED,
        }


@dataclass
class Monitoring:
    """``monitoring`` v1 ``projects.dashboards.list`` over the state file at ``path``."""

    path: Path
    prefix: str = "/monitoring/"
    apis: Sequence[DiscoveryApi] = field(default_factory=lambda: (load_api("monitoring.v1"),))

    def handle(self, call: Call) -> JsonObject:
        handler = handler_for(
            {"projects.dashboards.list": self._dashboards}, call.method.id, "monitoring."
        )
        return handler(read_state(self.path), call)

    def _dashboards(self, state: State, call: Call) -> JsonObject:
        project = call.params["projectsId"]
        if project not in (state["project"], project_number(state)):
            raise _denied("monitoring.dashboards.list", f"projects/{project}")
        return {}
