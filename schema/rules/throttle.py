"""NVML clock-event reasons that mean a GPU is being held back, as logged in `sys/gpuN/throttle`.

Idle, application-clock and display-clock settings are not slowdowns; these are.
"""

from __future__ import annotations

import math

THROTTLE_BITS = {
    0x4: "power cap",
    0x8: "hw slowdown",
    0x20: "sw thermal",
    0x40: "hw thermal",
    0x80: "power brake",
}
SLOWDOWN_MASK = sum(THROTTLE_BITS)


def slowdown_reasons(value: float | None) -> list[str]:
    """The slowdowns in one throttle reading (a float holding NVML's bit mask)."""
    if value is None or not math.isfinite(value):
        return []
    bits = int(value)
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]
