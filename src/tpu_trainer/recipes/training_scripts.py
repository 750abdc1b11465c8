"""MaxText's and MaxDiffusion's training scripts at the revisions recipes run them, from the
shipped data file.

A README recipe that submits ``--command "bash MaxText/configs/v5p/llama2_7b.sh ..."`` runs a
script of the image's MaxText checkout. ``training_scripts.yaml`` records, per repository and
revision: the text of each script such recipes run (and of the scripts those run), whether each
file they reach exists (the script, the training program, its base config), and where a missing
one went. It also records, for each tpu-recipes README that pins no revision, the README's last
commit and the revision of each repository current on that day. It is written by
``tools/build_training_scripts.py`` (``git show REV:PATH``, read as text); this module only
reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import cast

from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    parse_mapping,
    read_packaged,
    text,
    text_map,
)

DATA_FILE = "training_scripts.yaml"
_PACKAGE = "tpu_trainer.recipes.data"


@dataclass(frozen=True, slots=True)
class Gone:
    """Where a file went: the commit that removed it, its day, and its new path (if moved)."""

    commit: str
    date: str
    to: str


@dataclass(frozen=True, slots=True)
class SourceRevision:
    repository: str
    commit: str
    date: str
    files: Mapping[str, bool]
    """Files the recipes reach, and whether each exists at this revision."""
    scripts: Mapping[str, str]
    gone: Mapping[str, Gone]

    @property
    def short(self) -> str:
        return self.commit[:8]

    def exists(self, path: str) -> bool | None:
        if path in self.scripts:
            return True
        return self.files.get(path)


@dataclass(frozen=True, slots=True)
class KnownReadme:
    blob: str
    """The README's git blob id: the same text has the same id wherever it is."""
    path: str
    commit: str
    date: str
    current: Mapping[str, str]
    """Repository → the revision current on ``date``."""


@dataclass(frozen=True, slots=True)
class TrainingScripts:
    revisions: Mapping[str, Mapping[str, SourceRevision]]
    readmes: Mapping[str, KnownReadme]

    def find(self, repository: str, pin: str) -> SourceRevision | None:
        """The revision ``pin`` names: a commit given by at least 7 of its hex digits."""
        lowered = pin.lower()
        if len(lowered) < 7 or any(c not in "0123456789abcdef" for c in lowered):
            return None
        known = self.revisions.get(repository, {})
        return next((r for c, r in known.items() if c.startswith(lowered)), None)

    def earlier(self, revision: SourceRevision) -> list[SourceRevision]:
        """The repository's other shipped revisions older than ``revision``, newest first."""
        known = self.revisions.get(revision.repository, {}).values()
        older = [r for r in known if r.date <= revision.date and r.commit != revision.commit]
        return sorted(older, key=lambda r: r.date, reverse=True)

    def listed(self, repository: str) -> str:
        known = self.revisions.get(repository, {}).values()
        return ", ".join(f"{r.short} ({r.date})" for r in known) or "none"


def blob_id(data: bytes) -> str:
    """Git's blob id of ``data`` (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _revision(repo: str, commit: str, raw: Mapping[str, object]) -> SourceRevision:
    where = f"{DATA_FILE}: repositories.{repo}.{commit}"
    files = mapping(where, raw, "files")
    if not all(isinstance(v, bool) for v in files.values()):
        raise DataFileError(f"{where}: files must map paths to true or false")
    gone_raw = mapping(where, raw, "gone")
    gone = {
        path: Gone(
            text(f"{where}.gone.{path}", m, "commit"),
            text(f"{where}.gone.{path}", m, "date"),
            text(f"{where}.gone.{path}", m, "to", empty=True),
        )
        for path in gone_raw
        if (m := mapping(f"{where}.gone", gone_raw, path))
    }
    return SourceRevision(
        repository=repo,
        commit=commit,
        date=text(where, raw, "date"),
        files=cast(Mapping[str, bool], dict(files)),
        scripts=text_map(where, raw, "scripts"),
        gone=gone,
    )


def parse_training_scripts(document: str, name: str = DATA_FILE) -> TrainingScripts:
    raw = parse_mapping(document, name)
    repos = mapping(name, raw, "repositories")
    revisions = {
        repo: {
            commit: _revision(repo, commit, mapping(f"{name}: {repo}", revs, commit))
            for commit in revs
        }
        for repo in repos
        if (revs := mapping(f"{name}: repositories", repos, repo)) is not None
    }
    readmes_raw = mapping(name, raw, "readmes")
    readmes = {}
    for blob in readmes_raw:
        where = f"{name}: readmes.{blob}"
        entry = mapping(f"{name}: readmes", readmes_raw, blob)
        readmes[blob] = KnownReadme(
            blob,
            text(where, entry, "path"),
            text(where, entry, "commit"),
            text(where, entry, "date"),
            text_map(where, entry, "current"),
        )
    return TrainingScripts(revisions, readmes)


@cache
def training_scripts() -> TrainingScripts:
    """The shipped data file (read once)."""
    return parse_training_scripts(read_packaged(_PACKAGE, DATA_FILE))
