"""The MaxText side of a plan, parsed once: the arguments a check looks at and the slice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.slices import Slice


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxTextRequest:
    """One MaxText training command as the checks see it (pure data)."""

    args: Mapping[str, str]
    """``key=value`` program arguments, references expanded; the last one of a key wins (a dict
    keeps the order the command gives them)."""
    base_config: str = "maxtext/configs/base.yml"
    slice: Slice
    num_slices: int = 1
    precision: Precision = Precision.BF16
    xla_flags: tuple[str, ...] = field(default=())

    @property
    def devices_per_slice(self) -> int:
        """JAX devices of one slice (2 per chip on TPU v7)."""
        return self.slice.jax_devices

    @property
    def model_name(self) -> str:
        return self.args.get("model_name", "default")

    def get(self, key: str) -> str | None:
        return self.args.get(key)

    @classmethod
    def from_plan(cls, plan: Plan) -> MaxTextRequest:
        args: dict[str, str] = {}
        for text in plan.program_arg_texts:
            key, sep, value = plan.expand(text).partition("=")
            if sep:
                args.pop(key, None)
                args[key] = value
        return cls(
            args=args,
            base_config=plan.recipe.entry.base_config or "maxtext/configs/base.yml",
            slice=plan.slice,
            num_slices=plan.num_slices,
            precision=plan.precision,
            xla_flags=plan.xla_flags,
        )

    @classmethod
    def from_args(cls, argv: list[str], slice_: Slice, num_slices: int = 1) -> MaxTextRequest:
        """From ``key=value`` words (tests, benchmarks, hand-written commands)."""
        args: dict[str, str] = {}
        for text in argv:
            key, _, value = text.partition("=")
            args.pop(key, None)
            args[key] = value
        return cls(args=args, slice=slice_, num_slices=num_slices)
