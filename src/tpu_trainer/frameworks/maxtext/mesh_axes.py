"""MaxText's logical mesh axes and the ``ici_*``/``dcn_*`` settings that size them."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class MeshAxisName(StrEnum):
    """A logical mesh axis, named as MaxText 0.2.5 names it in ``mesh_axes``."""

    DILOCO = "diloco"
    DATA = "data"
    STAGE = "stage"
    FSDP = "fsdp"
    FSDP_TRANSPOSE = "fsdp_transpose"
    SEQUENCE = "sequence"
    CONTEXT = "context"
    CONTEXT_USP_ULYSSES = "context_usp_ulysses"
    CONTEXT_AUTOREGRESSIVE = "context_autoregressive"
    TENSOR = "tensor"
    TENSOR_SEQUENCE = "tensor_sequence"
    MODEL = "model"
    EXPERT = "expert"
    AUTOREGRESSIVE = "autoregressive"


_OTHER_STEMS = {MeshAxisName.STAGE: "pipeline", MeshAxisName.MODEL: "tensor"}
AXIS_SETTINGS: Mapping[MeshAxisName, str] = {a: _OTHER_STEMS.get(a, a.value) for a in MeshAxisName}
"""Mesh axis → the stem of its ``ici_<stem>_parallelism``/``dcn_<stem>_parallelism`` settings
(MaxText 0.2.5's table). Axes not listed (``attn_dp``, ``dcp``, ...) are always 1."""

REPLICATING_AXES = (MeshAxisName.DATA, MeshAxisName.DILOCO)
"""Mesh axes that copy the weights instead of splitting them."""


def setting_key(axis: str, network: str) -> str | None:
    """``ici_fsdp_parallelism`` for (``fsdp``, ``ici``); None for axes without a setting."""
    try:
        stem = AXIS_SETTINGS.get(MeshAxisName(axis))
    except ValueError:
        return None
    return f"{network}_{stem}_parallelism" if stem else None
