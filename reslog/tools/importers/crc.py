"""CRC32C (Castagnoli), masked as TFRecord frames mask it.

google-crc32c (the `import` extra) computes it in C with the CPU's CRC instruction: 0.2 µs a
100-byte record, against 12.5 µs for the table-driven loop below, which is used without it
(the import is then about 3x slower, never unchecked)."""

from __future__ import annotations

from collections.abc import Callable

MASK_DELTA = 0xA282EAD8


def _table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c_python(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _fast() -> Callable[[bytes], int] | None:
    try:
        import google_crc32c
    except ImportError:
        return None
    if google_crc32c.implementation != "c":  # its own pure-Python fallback: no faster
        return None
    return google_crc32c.value


crc32c: Callable[[bytes], int] = _fast() or crc32c_python


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF
