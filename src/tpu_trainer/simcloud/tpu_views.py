"""The emulated Cloud TPU's records as the API shows them: a v2 ``Node`` and a
``QueuedResource`` (every field checked against the discovery document on the way out)."""

from __future__ import annotations

import zlib

from tpu_trainer.simcloud.discovery import JsonObject
from tpu_trainer.simcloud.server import RPC_CODES
from tpu_trainer.simcloud.tpu_state import Record, accelerator_slice, stamp, worker_ips


def _workers(node: Record) -> list[str]:
    found = accelerator_slice(str(node["accelerator_type"]))
    return worker_ips(int(node["seq"]), found.hosts if found is not None else 1)


def ready(node: Record) -> None:
    """The node is READY: one worker (with its IP) per host of its slice."""
    node["state"] = "READY"
    node["workers"] = _workers(node)


_API_VERSIONS = {"v2": "V2", "v2alpha1": "V2_ALPHA1"}
"""The ``Node.apiVersion`` each API version writes (v2alpha1's enum has no V2)."""


def node_view(node: Record, version: str = "v2") -> JsonObject:
    """The node as API ``version`` (v2, v2alpha1) shows it."""
    project, zone, name = node["project"], node["zone"], node["name"]
    region = zone.rsplit("-", 1)[0]
    view: JsonObject = dict(node.get("request") or {})
    view.update(
        name=f"projects/{project}/locations/{zone}/nodes/{name}",
        acceleratorType=node["accelerator_type"],
        runtimeVersion=node["runtime_version"],
        state=node["state"],
        createTime=node.get("create_time") or stamp(0.0),
        id=node["id"],
        apiVersion=_API_VERSIONS.get(version, "V2"),
        cidrBlock="10.128.0.0/20",
    )
    view.setdefault(
        "networkConfig",
        {
            "enableExternalIps": True,
            "network": f"projects/{project}/global/networks/default",
            "subnetwork": f"projects/{project}/regions/{region}/subnetworks/default",
        },
    )
    view.setdefault(
        "serviceAccount",
        {
            "email": f"{zlib.crc32(project.encode())}-compute@developer.gserviceaccount.com",
            "scope": ["https://www.googleapis.com/auth/cloud-platform"],
        },
    )
    found = accelerator_slice(str(node["accelerator_type"]))
    if found is not None:
        view["acceleratorConfig"] = {
            "topology": found.topology_name,
            "type": found.accelerator.xpk_prefix.upper().replace("LITEPOD", "LITE_POD"),
        }
    if node.get("queued_resource"):
        view["queuedResource"] = (
            f"projects/{project}/locations/{zone}/queuedResources/{node['queued_resource']}"
        )
    if node["state"] == "READY":
        view["health"] = "HEALTHY"
        view["networkEndpoints"] = [
            {
                "ipAddress": ip,
                "port": 8470,
                "accessConfig": {"externalIp": f"34.{node['seq'] % 250}.0.{w + 1}"},
            }
            for w, ip in enumerate(node.get("workers") or _workers(node))
        ]
    return view


def queued_view(qr: Record) -> JsonObject:
    project, zone = qr["project"], qr["zone"]
    state: JsonObject = {"state": qr["state"]}
    if qr["state"] == "FAILED":
        failed = qr.get("failed") or {"code": RPC_CODES["INTERNAL"], "message": "node failed"}
        state["failedData"] = {"error": failed}
    return {
        **qr["request"],
        "name": f"projects/{project}/locations/{zone}/queuedResources/{qr['name']}",
        "createTime": qr["create_time"],
        "state": state,
    }
