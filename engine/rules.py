"""Rule variants as one frozen value, with named presets (RULES.md: everything marked *variant*).

>>> preset("classic").max_run_length
8
>>> preset("bicycle").hand_melds_without_centre_card
True
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum


class Forcing(StrEnum):
    """How a declined card that lays off on the decliner's table is handled (RULES.md 7)."""

    OPTIONAL = "optional"
    AUTOMATIC = "automatic"
    OFF = "off"


class StakeOnDraw(StrEnum):
    """What a drawn deal does to the next stake (RULES.md 8)."""

    DOUBLE = "double"
    CARRY = "carry"
    NONE = "none"


@dataclass(frozen=True)
class Rules:
    """A complete rule set; ``classic`` is the default.

    ``max_run_length`` is 8 in classic or ``None`` for no limit (runs of 9 and 10 cards);
    ``forcing`` is optional / automatic / off; ``hand_melds_without_centre_card`` lets hand cards
    reach the table without a centre card (Bicycle); ``stake_on_draw`` is double / carry / none;
    ``base_stake`` is the stake of a deal after a win.
    """

    name: str = "classic"
    max_run_length: int | None = 8
    forcing: Forcing = Forcing.OPTIONAL
    hand_melds_without_centre_card: bool = False
    stake_on_draw: StakeOnDraw = StakeOnDraw.DOUBLE
    base_stake: int = 1

    def __post_init__(self) -> None:
        if self.max_run_length is not None and not 3 <= self.max_run_length <= 10:
            raise ValueError(f"max_run_length must be 3..10 or None, not {self.max_run_length}")
        if self.base_stake < 1:
            raise ValueError(f"base_stake must be at least 1, not {self.base_stake}")

    def as_dict(self) -> dict[str, object]:
        """Return the rule set as plain JSON-ready values."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Rules:
        """Build a rule set from ``as_dict`` output; unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown rule options: {sorted(unknown)}")
        values = dict(data)
        if "forcing" in values:
            values["forcing"] = Forcing(str(values["forcing"]))
        if "stake_on_draw" in values:
            values["stake_on_draw"] = StakeOnDraw(str(values["stake_on_draw"]))
        return cls(**values)  # type: ignore[arg-type]


def _plain(value: object) -> object:
    return value.value if isinstance(value, StrEnum) else value


CLASSIC = Rules()

PRESETS: dict[str, Rules] = {
    "classic": CLASSIC,
    "long-runs": Rules(name="long-runs", max_run_length=None),
    "automatic-forcing": Rules(name="automatic-forcing", forcing=Forcing.AUTOMATIC),
    "no-forcing": Rules(name="no-forcing", forcing=Forcing.OFF),
    "bicycle": Rules(name="bicycle", hand_melds_without_centre_card=True),
    "carry-stakes": Rules(name="carry-stakes", stake_on_draw=StakeOnDraw.CARRY),
    "flat-stakes": Rules(name="flat-stakes", stake_on_draw=StakeOnDraw.NONE),
}


def preset(name: str) -> Rules:
    """Return the named preset; raises KeyError listing the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown rule set {name!r}; known: {', '.join(sorted(PRESETS))}") from None
