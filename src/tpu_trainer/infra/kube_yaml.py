"""YAML that kubectl reads as it was meant.

PyYAML writes YAML 1.1; kubectl reads YAML 1.2 (sigs.k8s.io/yaml). A string such as a run id
``60368e75`` is plain text to the one and the number 6.0368e79 to the other, so a label holding
it would reach the API server as a number and be refused (``cannot unmarshal number into Go
struct field ObjectMeta.metadata.labels of type string``). :class:`KubeDumper` writes every
string a YAML 1.2 reader would take for a number quoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

_NUMBER_1_2 = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""A number in YAML 1.2's core schema (decimal, exponent, octal, hexadecimal, infinity, NaN)."""


class KubeDumper(yaml.SafeDumper):
    """PyYAML's safe dumper that also quotes strings YAML 1.2 reads as numbers."""


KubeDumper.add_implicit_resolver("tag:yaml.org,2002:float", _NUMBER_1_2, list("-+0123456789."))


def dump_all(objects: Iterable[Mapping[str, Any]]) -> str:
    """The objects as one YAML stream for ``kubectl apply -f -``, keys in their order."""
    return yaml.dump_all([dict(o) for o in objects], Dumper=KubeDumper, sort_keys=False)
