"""Cloud TPU list prices per chip-hour, by family and region, loaded once from ``prices.yaml``.

Each family names the public page its figures come from and the date they are from. A family
the file leaves out (TPU v7: no public price) has no price here; the configuration's
``prices:`` mapping supplies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.data_file import (
    DataFileError,
    mapping,
    only_keys,
    optional_number,
    parse_mapping,
    read_packaged,
    text,
)

PRICES_FILE = "prices.yaml"


@dataclass(frozen=True, slots=True)
class RegionPrice:
    on_demand: float | None
    spot: float | None


@dataclass(frozen=True, slots=True)
class FamilyPrices:
    family: Family
    regions: Mapping[str, RegionPrice]
    default_region: str
    source: str
    date: str


def _price(where: str, raw: object) -> RegionPrice:
    if not isinstance(raw, dict):
        raise DataFileError(f"{where} must be a mapping with on_demand and spot")
    only_keys(where, raw, frozenset({"on_demand", "spot"}))
    prices = {k: optional_number(where, raw, k) for k in ("on_demand", "spot")}
    if any(v is not None and v <= 0 for v in prices.values()):
        raise DataFileError(f"{where}: prices must be > 0 (or null when unknown)")
    return RegionPrice(prices["on_demand"], prices["spot"])


def load_prices(document: str, where: str = PRICES_FILE) -> dict[Family, FamilyPrices]:
    """Parse and check a prices document: every family known, every price > 0 or null, a
    source and date for each family, its default region listed."""
    families = mapping(where, parse_mapping(document, where), "prices")
    table: dict[Family, FamilyPrices] = {}
    for key, raw in families.items():
        at = f"{where}: prices.{key}"
        try:
            family = Family(key)
        except ValueError:
            raise DataFileError(f"{at}: not a TPU family") from None
        if not isinstance(raw, dict):
            raise DataFileError(f"{at} must be a mapping")
        only_keys(at, raw, frozenset({"default_region", "regions", "source", "date"}))
        regions = {
            name: _price(f"{at}.regions.{name}", value)
            for name, value in mapping(at, raw, "regions").items()
        }
        default = text(at, raw, "default_region")
        if default not in regions:
            raise DataFileError(f"{at}: default_region {default} has no entry under regions")
        source = text(at, raw, "source")
        if not source.startswith("https://"):
            raise DataFileError(f"{at}: source must be an https:// address")
        table[family] = FamilyPrices(family, regions, default, source, text(at, raw, "date"))
    return table


PRICES: dict[Family, FamilyPrices] = load_prices(read_packaged(__package__ or "", PRICES_FILE))
"""The shipped list prices, by family."""
