"""The configuration's ``prices:`` mapping: chip-hour prices (USD) that override the shipped
table, by TPU family (``tpu7x``, ``v7``, ``v6e``, ``trillium``, ``v5litepod``, ...).

A family takes one number (its on-demand price) or a mapping with ``on_demand`` and/or
``spot``::

    prices: {tpu7x: 4.20, v6e: {spot: 1.0}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PRICES_EXAMPLE = "prices: {tpu7x: 4.20, v6e: {spot: 1.0}}"
_FAMILY = re.compile(r"^[a-z][a-z0-9]{1,15}$")
_KINDS = ("on_demand", "spot")


@dataclass(frozen=True, slots=True)
class ChipPrice:
    """A price override for one family; None where the configuration does not set it."""

    on_demand: float | None = None
    spot: float | None = None


class PriceError(ValueError):
    """A ``prices:`` value the configuration cannot use (the message says which)."""


def parse_prices(raw: Any) -> Mapping[str, ChipPrice]:
    """``prices:`` as written (YAML read as text) → family → :class:`ChipPrice`."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, dict):
        raise PriceError("expected a mapping of TPU family to price per chip-hour")
    found: dict[str, ChipPrice] = {}
    for key, value in raw.items():
        family = str(key).strip().lower()
        if not _FAMILY.match(family):
            raise PriceError(f"'{key}' is not a TPU family name (e.g. tpu7x, v6e, v5p)")
        if isinstance(value, dict):
            unknown = sorted(str(k) for k in value if k not in _KINDS)
            if unknown:
                raise PriceError(f"{family}: unknown field(s) {', '.join(unknown)}")
            found[family] = ChipPrice(
                *(_amount(f"{family}.{kind}", value.get(kind)) for kind in _KINDS)
            )
        else:
            found[family] = ChipPrice(on_demand=_amount(family, value))
    return found


def _amount(where: str, raw: Any) -> float | None:
    if raw is None or str(raw).strip().lower() in ("", "null", "~"):
        return None
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise PriceError(f"{where}: '{str(raw)[:40]}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise PriceError(f"{where}: {value} is not a price (USD per chip-hour, > 0)")
    return value
