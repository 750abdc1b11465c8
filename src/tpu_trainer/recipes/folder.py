"""Recipe folder names: ``<seq>-<precision>-<family>-<topology>[-suffix]``.

``4k-bf16-tpu7x-4x4x8``, ``4k-bf16-tpu7x-4x8x8-gcs``, ``bf16-tpu7x-4x4x4`` (no sequence length).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Precision

_FOLDER = re.compile(
    r"^(?:(?P<seq>\d+k)-)?(?P<precision>bf16|fp8)-(?P<prefix>[a-z0-9]+?)-"
    r"(?P<topology>\d+(?:x\d+)*)(?:-(?P<suffix>[a-z][a-z0-9-]*))?$"
)


@dataclass(frozen=True, slots=True)
class RecipeFolder:
    name: str
    seq: str | None
    """Sequence length as written ("4k", "128k"), or None."""
    precision: Precision
    device_type: str
    """``<prefix>-<topology>``, to be parsed into a Slice."""
    topology: str
    suffix: str | None
    """Storage or other variant (``gcs``, ``lustre``)."""

    @property
    def seq_tokens(self) -> int | None:
        return int(self.seq[:-1]) * 1024 if self.seq else None


def parse_folder_name(name: str) -> RecipeFolder | None:
    """The parts of a recipe folder name, or None if ``name`` does not follow the pattern."""
    m = _FOLDER.match(name)
    if m is None or ("x" not in m.group("topology") and m.group("prefix") != "cpu"):
        return None  # TPU recipe folders carry the topology form; only cpu-1 is a bare number
    return RecipeFolder(
        name=name,
        seq=m.group("seq"),
        precision=Precision(m.group("precision")),
        device_type=f"{m.group('prefix')}-{m.group('topology')}",
        topology=m.group("topology"),
        suffix=m.group("suffix"),
    )
