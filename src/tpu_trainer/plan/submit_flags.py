"""The flags of the submit command (``xpk workload create`` or ``gcluster job submit``)."""

from __future__ import annotations

from tpu_trainer.infra.xpk import SKIP_VALIDATION
from tpu_trainer.plan.slices import Slice
from tpu_trainer.recipes.cluster_toolkit import gcluster_fixed
from tpu_trainer.recipes.recipe import Recipe


def submit_flags(
    recipe: Recipe, slice_: Slice, num_slices: int, priority: str | None
) -> tuple[tuple[str, str | None], ...]:
    """The submitter's flags in the recipe's order, with the values the tool fills (the
    cluster, project, zone, workload name and image as variables; the slice; no restarts) and,
    for xpk, the flags it always passes (``--project-number`` from ``PROJECT_NUMBER``, which the
    tool sets, and ``--skip-validation`` when the image is given: the tool has checked gcloud and
    kubectl, and xpk builds nothing); ``--command`` is generated."""
    fixed: dict[str, str | None] = {
        "--cluster": "${CLUSTER_NAME}",
        "--project": "${PROJECT_ID}",
        "--zone": "${ZONE}",
        "--max-restarts": "0",
        "--num-slices": str(num_slices),
        "--workload": "${WORKLOAD_NAME}",
        "--docker-image": "${WORKLOAD_IMAGE}",
        "--base-docker-image": "${WORKLOAD_IMAGE}",
        "--device-type": slice_.device_type,
        "--tpu-type": slice_.device_type,
    }
    if recipe.submitter == "gcluster":
        fixed = gcluster_fixed(fixed)
    if priority:
        fixed["--priority"] = priority
    out: list[tuple[str, str | None]] = []
    for flag in recipe.xpk_flags:
        value = fixed.get(flag.name, flag.value)
        if flag.name == "--command":
            value = "<generated>"
        out.append((flag.name, value))
    present = {name for name, _ in out}
    if recipe.submitter == "gcluster":
        return tuple(out)
    always: list[tuple[str, str | None]] = [
        ("--priority", priority or "very-high"),
        ("--max-restarts", "0"),
        ("--num-slices", str(num_slices)),
        ("--enable-debug-logs", None),
        ("--project-number", "${PROJECT_NUMBER}"),
    ]
    if "--docker-image" in present:  # no image to build: gcloud and kubectl are all it needs
        always.append((SKIP_VALIDATION, None))
    for name, default in always:
        if name not in present:
            out.insert(len(out) - 1, (name, default))
    return tuple(out)
