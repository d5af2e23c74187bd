"""The values a typed setting takes: `Range` and the number types built on it, and the
precisions. stages/common/params.py checks params.yaml against them; the library's settings types
(bert.training.recipe) carry them in their fields' types."""

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Annotated, Literal


@dataclass(frozen=True)
class Range:
    """The values a number param may take: from `low` to `high`, each end included unless marked
    open. `meaning` says what a special value stands for, e.g. "0 = all CPU cores"."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    meaning: str = ""

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self, kind: type) -> str:
        what = "an integer" if kind is int else "a finite number"
        low, high = _plain(self.low), _plain(self.high)
        if self.high < math.inf:
            what += f" in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        elif self.low > -math.inf:
            what += f" {'>' if self.low_open else '>='} {low}"
        return what + (f" ({self.meaning})" if self.meaning else "")


def _plain(bound: float) -> str:
    return str(int(bound)) if math.isfinite(bound) and bound == int(bound) else f"{bound:g}"


Count = Annotated[int, Range(low=1)]  # how many of something, where none makes no sense
Probability = Annotated[float, Range(0, 1)]
Share = Annotated[float, Range(0, 1, high_open=True)]  # a part of a whole that must leave some over
LearningRate = Annotated[float, Range(0, low_open=True)]
WeightDecay = Annotated[float, Range(low=0)]
# np.random.seed takes [0, 2**32), the narrowest range of the seeding calls that a seed reaches.
Seed = Annotated[int, Range(0, 2**32 - 1)]
Precision = Literal["fp32", "bf16", "fp16"]


def out_of_range(settings) -> str | None:
    """The first field of the dataclass `settings` outside its type's Range, as a line naming it
    (for a settings type's __post_init__: params.yaml's decoder checks each range before), or None."""
    hints = typing.get_type_hints(type(settings), include_extras=True)
    for field in dataclasses.fields(settings):
        hint, value = hints[field.name], getattr(settings, field.name)
        bounds = typing.get_args(hint)[1] if typing.get_origin(hint) is Annotated else None
        if isinstance(bounds, Range) and value not in bounds:
            return f"{field.name} is {value}; it must be {bounds.describe(typing.get_args(hint)[0])}"
    return None
