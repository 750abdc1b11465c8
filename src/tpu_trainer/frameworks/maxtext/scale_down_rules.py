"""What a MaxText 0.2.5 recipe argument means for a run on this machine's CPU, loaded once from
``data/scale_down_rules.yaml`` (how the rules were found is written there)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from tpu_trainer.catalog.data_file import (
    integer,
    mapping,
    parse_mapping,
    read_packaged,
    string_set,
    strings,
    text,
    text_map,
)

SCALE_DOWN_RULES_FILE = "data/scale_down_rules.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleDownRules:
    attention_periods: Mapping[str, int]
    """model_name or decoder_block → layers in one cycle of its local/global attention."""
    tpu_attention: frozenset[str]
    """Attention kernels that refuse a CPU."""
    cpu_attention: str
    """The attention MaxText itself picks on a CPU."""
    gpu_quantization: frozenset[str]
    cpu_kernel_switches: Mapping[str, str]
    """True on a TPU, turned off on a CPU → why."""
    cloud_switches: frozenset[str]
    topology_keys: frozenset[str]
    profiler_keys: frozenset[str]
    profiler_prefixes: tuple[str, ...]
    data_keys: frozenset[str]
    data_prefixes: tuple[str, ...]
    launcher_keys: frozenset[str]
    """Set by the local launcher itself."""


def load_scale_down_rules(text_: str, name: str = SCALE_DOWN_RULES_FILE) -> ScaleDownRules:
    """Parse and check the rules document (every key present, of the right kind)."""
    doc = parse_mapping(text_, name)
    periods = mapping(name, doc, "attention_periods")
    where = f"{name}: attention_periods"
    return ScaleDownRules(
        attention_periods=MappingProxyType(
            {k: integer(where, periods, k, minimum=1) for k in periods}
        ),
        tpu_attention=string_set(name, doc, "tpu_attention"),
        cpu_attention=text(name, doc, "cpu_attention"),
        gpu_quantization=string_set(name, doc, "gpu_quantization"),
        cpu_kernel_switches=MappingProxyType(text_map(name, doc, "cpu_kernel_switches")),
        cloud_switches=string_set(name, doc, "cloud_switches"),
        topology_keys=string_set(name, doc, "topology_keys"),
        profiler_keys=string_set(name, doc, "profiler_keys"),
        profiler_prefixes=strings(name, doc, "profiler_prefixes"),
        data_keys=string_set(name, doc, "data_keys"),
        data_prefixes=strings(name, doc, "data_prefixes"),
        launcher_keys=string_set(name, doc, "launcher_keys"),
    )


@functools.cache
def scale_down_rules() -> ScaleDownRules:
    """The packaged rules, read and checked on first use."""
    return load_scale_down_rules(read_packaged(__package__ or "", SCALE_DOWN_RULES_FILE))


_RULES = scale_down_rules()
ATTENTION_PERIODS = _RULES.attention_periods
TPU_ATTENTION = _RULES.tpu_attention
CPU_ATTENTION = _RULES.cpu_attention
GPU_QUANTIZATION = _RULES.gpu_quantization
CPU_KERNEL_SWITCHES = _RULES.cpu_kernel_switches
CLOUD_SWITCHES = _RULES.cloud_switches
TOPOLOGY_KEYS = _RULES.topology_keys
PROFILER_KEYS = _RULES.profiler_keys
PROFILER_PREFIXES = _RULES.profiler_prefixes
DATA_KEYS = _RULES.data_keys
DATA_PREFIXES = _RULES.data_prefixes
LAUNCHER_KEYS = _RULES.launcher_keys
