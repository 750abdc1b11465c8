"""What a run's TPU-hours cost: the price per chip-hour that applies, and the cost of each
phase of its timeline.

Prices come from the configuration's ``prices:`` first, then the shipped table
(``catalog/prices.yaml``: on-demand list prices by family and region, each with its source).
Runs are priced on demand; a family without a price (TPU v7 has no public one) is priced
"unknown" with the configuration key that fixes it. Runs on this machine's CPU cost nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tpu_trainer.catalog.accelerators import Family, family_from_prefix
from tpu_trainer.catalog.prices import PRICES
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.metrics.timeline import Timeline


@dataclass(frozen=True, slots=True)
class ChipRate:
    """The price per chip-hour a run is charged at, and where it comes from."""

    usd_per_chip_hour: float | None
    """On-demand USD per chip-hour; None when unknown."""
    spot_usd_per_chip_hour: float | None
    source: str
    """``configuration prices.<family>``, the shipped table's page, date and region, or why
    there is no price."""

    @property
    def known(self) -> bool:
        return self.usd_per_chip_hour is not None


def config_key(family: Family) -> str:
    """The ``prices:`` key that names ``family`` (TPU v7 is ``tpu7x``, as xpk calls it)."""
    return "tpu7x" if family is Family.V7 else family.value


def chip_rate(
    family: Family, region: str | None, overrides: Mapping[str, ChipPrice] | None = None
) -> ChipRate:
    """The price per chip-hour of ``family`` in ``region``: the configuration's, else the
    shipped table's (the family's listed region when ``region`` has no entry)."""
    if family is Family.CPU:
        return ChipRate(0.0, 0.0, "this machine's CPU: no TPU charge")
    own = _override(family, overrides or {})
    listed = PRICES.get(family)
    table_price, table_spot, table_source = None, None, ""
    if listed is not None:
        where = region if region is not None and region in listed.regions else listed.default_region
        price = listed.regions[where]
        table_price, table_spot = price.on_demand, price.spot
        moved = "" if where == region else f" (no entry for {region or 'the run'}'s region)"
        table_source = f"{listed.source} ({listed.date}), {where}{moved}"
    on_demand = own.on_demand if own is not None and own.on_demand is not None else table_price
    spot = own.spot if own is not None and own.spot is not None else table_spot
    key = config_key(family)
    if on_demand is None:
        source = f"price unknown — set prices.{key} in the configuration"
    elif own is not None and own.on_demand is not None:
        source = f"configuration prices.{key}"
    else:
        source = table_source
    return ChipRate(on_demand, spot, source)


def _override(family: Family, overrides: Mapping[str, ChipPrice]) -> ChipPrice | None:
    for key, price in overrides.items():
        if family_from_prefix(key) is family:
            return price
    return None


@dataclass(frozen=True, slots=True)
class RunCost:
    """A run's cost: per phase (in timeline order), in total and per million tokens."""

    rate: ChipRate
    phases: tuple[float | None, ...]
    total: float | None
    tokens: float | None
    per_million_tokens: float | None


def run_cost(line: Timeline, rate: ChipRate, tokens: float | None) -> RunCost:
    price = rate.usd_per_chip_hour
    if price is None:
        return RunCost(rate, tuple(None for _ in line.phases), None, tokens, None)
    phases = tuple(p.chip_hours * price for p in line.phases)
    total = sum(phases)
    per_million = total / (tokens / 1e6) if tokens and total > 0 else None
    return RunCost(rate, phases, total, tokens, per_million)
