"""The texts gcloud prints for Google Cloud API failures, and resource paths and URLs."""

from __future__ import annotations

import zlib

from tpu_trainer.fakecloud.state import State, next_id

CONTAINER_API = "https://container.googleapis.com"

EXHAUSTED = (
    "Google Compute Engine: Requested resource is exhausted: RESOURCE_EXHAUSTED: not enough "
    "resources available in reservation '{where}' to fulfill the request (lack of capacity). "
    "Try a different reservation or zone, or try again later."
)
"""The operation error of a create that found no room (xpk relays what follows
``finished with error:``, and notes a stockout on ``lack of capacity``)."""

_CANONICAL = {
    "RESOURCE_EXHAUSTED": ("RESOURCE_EXHAUSTED", 8),
    "was not found": ("NOT_FOUND", 5),
    "is incorrect": ("INVALID_ARGUMENT", 3),
}


def cluster_path(project: str, location: str, cluster: str) -> str:
    return f"projects/{project}/locations/{location}/clusters/{cluster}"


def response_error(command: str, code: int, message: str) -> str:
    """``ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=...``."""
    return f"ERROR: ({command}) ResponseError: code={code}, message={message}\n"


def invalid_choice(command: str, word: str, choices: list[str]) -> str:
    listed = "\n".join(f"  {c}" for c in sorted(choices))
    return (
        f"ERROR: ({command}) Invalid choice: '{word}'.\nMaybe you meant:\n{listed}\n\n"
        "To search the help text of gcloud commands, run:\n  gcloud help -- SEARCH_TERMS\n"
    )


def op_error(
    state: State, command: str, op_type: str, project: str, location: str, target: str, message: str
) -> str:
    """A long-running GKE operation that ended in an error, as gcloud prints it."""
    code_name, code = next((v for k, v in _CANONICAL.items() if k in message), ("INTERNAL", 13))
    op = f"operation-{next_id(state)}-{zlib.crc32(target.encode()) & 0xFFFFFF:06x}"
    quoted = message.replace("'", "\\'")
    base = f"{CONTAINER_API}/v1beta1/projects/{project}/locations/{location}"
    return (
        f"ERROR: ({command}) Operation [<Operation\n"
        f" clusterConditions: [<StatusCondition\n"
        f" canonicalCode: CanonicalCodeValueValuesEnum({code_name}, {code})\n"
        f" message: '{quoted}'>]\n"
        f" detail: '{quoted}'\n"
        f" endTime: '2026-11-22T06:04:12.338170861Z'\n"
        f" name: '{op}'\n"
        f" operationType: OperationTypeValueValuesEnum({op_type}, 7)\n"
        f" selfLink: '{base}/operations/{op}'\n"
        f" startTime: '2026-11-22T06:00:01.112894530Z'\n"
        f" status: StatusValueValuesEnum(DONE, 3)\n"
        f" statusMessage: '{quoted}'\n"
        f" targetLink: '{base}/clusters/{target}'\n"
        f" zone: '{location}'>] finished with error: {message}\n"
    )
