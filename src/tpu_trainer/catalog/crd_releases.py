"""The operators whose custom resources the tool writes, loaded once from ``crd_releases.yaml``:
per API group, the project, the release whose API the tool writes for, where to install it,
and the CRD file of each kind in ``crds/``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    only_keys,
    parse_mapping,
    read_packaged,
    text,
    text_map,
)

CRD_RELEASES_FILE = "crd_releases.yaml"
_KEYS = frozenset({"project", "release", "install", "kinds"})


@dataclass(frozen=True, slots=True)
class CrdRelease:
    """One operator's release, as the tool writes its objects."""

    group: str
    project: str
    release: str
    install: str
    """Where its installation is documented."""
    kinds: Mapping[str, str]
    """Kind → its CRD file, relative to ``catalog/crds``."""

    @property
    def named(self) -> str:
        """``Kueue v0.19.2``."""
        return f"{self.project} {self.release}"


def load_crd_releases(text_: str, name: str = CRD_RELEASES_FILE) -> dict[str, CrdRelease]:
    """Parse and check a ``crd_releases:`` document (API group → release)."""
    groups = mapping(name, parse_mapping(text_, name), "crd_releases")
    out: dict[str, CrdRelease] = {}
    for group, raw in groups.items():
        where = f"{name}: crd_releases.{group}"
        if not isinstance(raw, dict):
            raise DataFileError(f"{where}: must be a mapping")
        only_keys(where, raw, _KEYS)
        kinds = text_map(where, raw, "kinds")
        if not kinds or not all(kinds.values()):
            raise DataFileError(f"{where}: kinds must map each kind to its CRD file")
        out[group] = CrdRelease(
            group,
            text(where, raw, "project"),
            text(where, raw, "release"),
            text(where, raw, "install"),
            kinds,
        )
    return out


@functools.cache
def crd_releases() -> Mapping[str, CrdRelease]:
    """The packaged table, read and checked on first use."""
    return load_crd_releases(read_packaged("tpu_trainer.catalog", CRD_RELEASES_FILE))
