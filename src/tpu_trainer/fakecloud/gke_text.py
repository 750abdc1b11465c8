"""The texts gcloud prints for Google Cloud API failures, and resource paths and URLs."""

from __future__ import annotations

CONTAINER_API = "https://container.googleapis.com"

EXHAUSTED = (
    "Google Compute Engine: Requested resource is exhausted: RESOURCE_EXHAUSTED: not enough "
    "resources available in reservation '{where}' to fulfill the request (lack of capacity). "
    "Try a different reservation or zone, or try again later."
)
"""The operation error of a create that found no room (gcloud prints it after ``finished with
error:``; ``lack of capacity`` is what marks a stockout)."""


def cluster_path(project: str, location: str, cluster: str) -> str:
    return f"projects/{project}/locations/{location}/clusters/{cluster}"


def invalid_choice(command: str, word: str, choices: list[str]) -> str:
    listed = "\n".join(f"  {c}" for c in sorted(choices))
    return (
        f"ERROR: ({command}) Invalid choice: '{word}'.\nMaybe you meant:\n{listed}\n\n"
        "To search the help text of gcloud commands, run:\n  gcloud help -- SEARCH_TERMS\n"
    )
