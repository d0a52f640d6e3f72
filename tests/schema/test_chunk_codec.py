"""schema/store/chunk_codec.py (stdlib) and schema/store/chunk_codec_numpy.py: every chunk comes
back to the bit, both encoders write the same bytes, both decoders read the same bits, and a blob
that is not a whole chunk of a known version raises ValueError instead of giving numbers.

Floats are fed as array('d') built from raw bytes and compared as bytes, so a signalling NaN's
bit pattern is never loaded into a float register on the test's side.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import zipfile
import zlib
from array import array

import numpy as np
import pytest

from reslog.agent import bundle
from schema.store import chunk_codec as codec
from schema.store import chunk_codec_numpy as fast
from schema.store.chunk_codec import DECIMAL, DELTA, DELTA2, LINEAR, RAW, SHUFFLE, XOR

KINDS = [
    (DELTA, DELTA, SHUFFLE),
    (DELTA2, DELTA2, XOR),
    (SHUFFLE, XOR, DELTA),
    (XOR, SHUFFLE, DELTA2),
    (RAW, RAW, RAW),  # head chunks
]
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SPECIAL_BITS = [
    0x7FF8000000000000,  # the quiet NaN
    0xFFF8000000000000,  # a quiet NaN with the sign bit
    0x7FF800000000BEEF,  # a quiet NaN with a payload
    0x7FF0000000000001,  # a signalling NaN
    0x7FF4DEADBEEF0001,  # a signalling NaN with a payload
    0xFFF0000000000001,  # a negative signalling NaN
    0x7FF0000000000000,  # +inf
    0xFFF0000000000000,  # -inf
    0x8000000000000000,  # -0.0
    0x0000000000000000,  # 0.0
    0x0000000000000001,  # the smallest subnormal
    0x000FFFFFFFFFFFFF,  # the largest subnormal
    0x800FFFFFFFFFFFFF,  # a negative subnormal
    0x7FEFFFFFFFFFFFFF,  # the largest finite
]


def floats_of_bits(bits: list[int]) -> array:
    out = array("d")
    out.frombytes(struct.pack(f"<{len(bits)}Q", *bits))
    if sys.byteorder == "big":
        out.byteswap()
    return out


def bits_of(column) -> bytes:
    """A float column's bytes, little-endian, from array('d') or an ndarray."""
    if isinstance(column, np.ndarray):
        return column.astype("<f8").tobytes()
    a = array("d", column)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def random_bits(rng: random.Random, n: int) -> list[int]:
    return [
        rng.choice(SPECIAL_BITS) if rng.random() < 0.2 else rng.getrandbits(64) for _ in range(n)
    ]


def random_steps(rng: random.Random, n: int) -> list[int]:
    shape = rng.randrange(5)
    if shape == 0:  # regular, anywhere in int64's range
        first, step = rng.randrange(INT64_MIN, INT64_MAX), rng.choice([1, 3, -7, 1 << 40])
        return [((first + i * step - INT64_MIN) % (1 << 64)) + INT64_MIN for i in range(n)]
    if shape == 1:  # rising with restarts
        out, s = [], 0
        for _ in range(n):
            s = rng.randrange(s) if s and rng.random() < 0.01 else s + rng.choice([1, 1, 2, 5])
            out.append(s)
        return out
    return [
        rng.choice([INT64_MIN, INT64_MAX, -1, 0, rng.randrange(INT64_MIN, INT64_MAX)])
        for _ in range(n)
    ]


def round_trip(
    steps: list[int],
    walls: array,
    values: list[array],
    kinds=KINDS[0],
    ids: list[int] | None = None,
) -> bytes:
    """Encode with both encoders (same bytes), decode with both decoders (same bits as went in)."""
    blob = codec.encode(steps, walls, *values, kinds=kinds, ids=ids)
    np_blob = fast.encode(
        np.array(steps, dtype=np.int64),
        np.frombuffer(walls.tobytes()),
        *[np.frombuffer(v.tobytes()) for v in values],
        kinds=kinds,
        ids=None if ids is None else np.array(ids, dtype=np.int64),
    )
    assert np_blob == blob
    for got in (codec.decode(blob), fast.decode(blob)):
        assert list(got.steps) == steps
        assert got.ids is None if ids is None else list(got.ids) == ids
        assert bits_of(got.walls) == bits_of(walls)
        assert len(got.values) == len(values)
        for column, sent in zip(got.values, values, strict=True):
            assert bits_of(column) == bits_of(sent)
    np_steps = fast.decode(blob).steps
    assert np_steps.dtype == np.int64 and fast.decode(blob).walls.dtype == np.float64
    assert isinstance(codec.decode(blob).steps, array) and len(np_steps) == len(steps)
    return blob


@pytest.mark.parametrize("kinds", KINDS, ids=lambda k: "-".join(codec.KIND_NAMES[x] for x in k))
def test_random_bit_patterns_come_back_to_the_bit(kinds):
    rng = random.Random(sum(kinds))
    for n in (0, 1, 2, 3, 4, 17, 1000, 4096):
        for _ in range(3):
            k = rng.randint(1, 3)
            ids = None if rng.random() < 0.5 else random_steps(rng, n)
            values = [floats_of_bits(random_bits(rng, n)) for _ in range(k)]
            round_trip(
                random_steps(rng, n), floats_of_bits(random_bits(rng, n)), values, kinds, ids
            )


def test_nan_payloads_infinities_signed_zero_and_subnormals_each_keep_their_bits():
    values = floats_of_bits(SPECIAL_BITS)
    walls = floats_of_bits(list(reversed(SPECIAL_BITS)))
    steps = list(range(len(SPECIAL_BITS)))
    for kinds in KINDS:
        round_trip(steps, walls, [values], kinds)
    # a column of one signalling NaN repeated is stored as a constant, and stays that NaN
    same = floats_of_bits([0x7FF4DEADBEEF0001] * 100)
    blob = round_trip(list(range(100)), same, [same])
    assert [kind for kind, _ in codec.describe(blob)["streams"]] == ["linear"] * 3


def test_steps_at_int64s_ends_and_in_any_order_come_back_exactly():
    steps = [INT64_MAX, INT64_MIN, 0, -1, INT64_MAX, INT64_MAX - 1, INT64_MIN + 1, 5, 3, 3]
    walls = array("d", [1.7e9 + i for i in range(len(steps))])
    for kinds in KINDS:
        round_trip(steps, walls, [walls], kinds)
    # a regular progression that wraps past int64's end is not linear in int64 terms: exact too
    wrapping = [INT64_MAX - 2, INT64_MAX - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1]
    round_trip([INT64_MAX - 4 + i for i in range(5)], walls[:5], [walls[:5]])
    blob = codec.encode(wrapping, walls[:5], walls[:5])
    assert list(codec.decode(blob).steps) == wrapping == fast.decode(blob).steps.tolist()


def test_ids_interleaved_by_a_compaction_cost_little_and_come_back():
    """A sealed chunk of a series merges its flushes' chunks: runs of consecutive ids with
    gaps where other series' points took ids."""
    rng = random.Random(9)
    ids, at = [], 1000
    while len(ids) < 4096:
        run = rng.randint(1, 64)
        ids += range(at, at + run)
        at += run + rng.randint(1, 2000)
    ids = ids[:4096]
    n = len(ids)
    walls = array("d", [1.764e9 + 0.5 * i for i in range(n)])
    values = [floats_of_bits(random_bits(rng, n))]
    blob = round_trip(list(range(n)), walls, values, ids=ids)
    info = codec.describe(blob)
    assert info["ids"] and info["streams"][2][0] == "delta"
    assert info["streams"][2][1] < n  # under a byte a point
    assert codec.describe(codec.encode(list(range(n)), walls, *values))["ids"] is False
    with pytest.raises(ValueError, match=r"4096 steps, 4096 walls, values \[4096\], 3 ids"):
        codec.encode(list(range(n)), walls, *values, ids=[1, 2, 3])
    with pytest.raises(ValueError, match="an id is outside int64"):
        fast.encode([1], [1.0], [1.0], ids=[1 << 64])


def test_empty_one_and_two_point_chunks():
    for n in (0, 1, 2):
        steps = [INT64_MIN + 7 * i for i in range(n)]
        walls = floats_of_bits([0x41DA5E0000000000 + i for i in range(n)])
        blob = round_trip(steps, walls, [floats_of_bits(SPECIAL_BITS[:n])] * 2)
        assert codec.describe(blob)["points"] == n and codec.describe(blob)["columns"] == 2


def test_regular_steps_and_constant_columns_cost_sixteen_bytes():
    n = 4096
    walls = array("d", [1.764e9 + 0.25 * i for i in range(n)])  # exactly regular bit patterns
    blob = round_trip(list(range(0, 4 * n, 4)), walls, [array("d", [3e-4]) * n])
    info = codec.describe(blob)
    assert info["streams"] == [("linear", 16)] * 3
    assert info["bytes"] == 7 + 3 * 9 + 4 + 3 * 16  # header, directory, its CRC, payloads
    assert info["version"] == 2
    old = codec.encode(list(range(0, 4 * n, 4)), walls, array("d", [3e-4]) * n, version=1)
    assert codec.describe(old)["bytes"] == 7 + 3 * (5 + 16) + 4


def test_a_training_series_compresses_and_keys_logged_together_share_steps_and_walls():
    rng = np.random.default_rng(0)
    n = 4096
    steps = np.arange(10_000, 10_000 + n)
    walls = 1.764e9 + np.cumsum(0.3 + rng.normal(0, 0.01, n))
    loss = (2.5 + 0.05 * rng.standard_normal(n)).astype(np.float32).astype(np.float64)
    tokens = (steps + 1) * 524_288.0
    alone = [fast.encode(steps, walls, v) for v in (loss, tokens)]
    together = fast.encode(steps, walls, loss, tokens)
    assert codec.encode(steps.tolist(), walls.tolist(), loss.tolist(), tokens.tolist()) == together
    # a float32 loss keeps 4 of its 8 bytes at most; the shared walls are paid for once
    assert len(alone[0]) < 8 * n + 4 * n  # steps ~ 0, walls <= 8, loss <= 4
    assert len(together) < sum(map(len, alone))
    got = codec.decode(together, columns=[1])
    assert bits_of(got.values[0]) == tokens.tobytes() and len(got.values) == 1
    assert fast.decode(together, columns=[1]).values[0].tobytes() == tokens.tobytes()
    with pytest.raises(ValueError, match="not a column 2"):
        codec.decode(together, columns=[2])


def decimal_columns(rng: random.Random, n: int) -> list[array]:
    """Floats that are decimals (m / 10**e), then such columns with one value that is not."""
    mw = [rng.randrange(60_000, 700_000) for _ in range(n)]
    out = [
        array("d", [m / 1000.0 for m in mw]),  # watts from milliwatts
        array("d", [float(rng.randrange(30, 90)) for _ in range(n)]),  # degrees
        array("d", [-m / 100.0 for m in mw]),  # negative
        array("d", [(1 + i) / 1000.0 for i in range(n)]),  # a counter: not linear as floats
        array("d", [m / 1e12 for m in mw]),  # the finest exponent
        array("d", [float((1 << 53) - rng.randrange(3)) for _ in range(n)]),  # exact ints end
    ]
    for spoiler in (0x8000000000000000, 0x7FF8000000000000, 0x7FF0000000000000, 0x7FF4DEADBEEF0001):
        raw = bytearray(out[0].tobytes())  # -0.0, NaN, inf, a NaN payload, as bytes
        at = 8 * rng.randrange(n)
        raw[at : at + 8] = floats_of_bits([spoiler]).tobytes()
        bad = array("d")
        bad.frombytes(bytes(raw))
        out.append(bad)
    out.append(array("d", [m / 1000.0 + 1e-9 for m in mw]))  # not a decimal at any exponent
    out.append(array("d", [m * 1e12 for m in mw]))  # integers past 2^53
    return out


def test_decimal_columns_are_stored_as_integers_and_come_back_to_the_bit():
    rng = random.Random(7)
    n = 2000
    steps = list(range(n))
    walls = floats_of_bits([0x41DA5E0000000000 + rng.randrange(1 << 20) for _ in range(n)])
    columns = decimal_columns(rng, n)
    blob = round_trip(steps, walls, columns)
    kinds = [kind for kind, _ in codec.describe(blob)["streams"][2:]]
    assert kinds == ["decimal"] * 6 + ["shuffle"] * 6

    energy, total = array("d"), 0
    for _ in range(n):
        total += rng.randrange(60_000, 700_000)
        energy.append(total / 1000.0)  # a counter in joules from millijoules
    inner = [
        codec.decimal_parts(codec.unpack(codec.encode(steps, walls, c)).values[0][1])[:2]
        for c in (columns[0], energy, columns[3])
    ]
    assert inner == [(3, SHUFFLE), (3, DELTA), (3, LINEAR)]  # noisy, a counter, regular ints
    round_trip(steps, walls, [energy])

    def watts_bytes(**how) -> int:
        return codec.describe(codec.encode(steps, walls, columns[0], **how))["streams"][2][1]

    assert watts_bytes() < 0.6 * watts_bytes(decimal=False)
    # whatever the exponent, the spoilers and the mix: both encoders agree
    for _ in range(20):
        k = rng.randint(1, 4)
        picked = [rng.choice(columns)[:m] for m in [rng.choice([3, 8, 9, 500])] for _ in range(k)]
        m = len(picked[0])
        round_trip(steps[:m], walls[:m], picked)


def _blob(version: int = codec.FORMAT_VERSION, ids: bool = True) -> bytes:
    rng = random.Random(5)
    steps = random_steps(rng, 300)
    return codec.encode(
        steps,
        floats_of_bits(random_bits(rng, 300)),
        floats_of_bits(random_bits(rng, 300)),
        array("d", [1.0]) * 300,
        ids=list(range(1000, 1600, 2)) if ids else None,
        version=version,
    )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("decode", [codec.decode, fast.decode], ids=["stdlib", "numpy"])
def test_every_cut_and_every_flipped_byte_raises_value_error(decode, version):
    """Version 2 (per-stream CRCs) and version 1 (one CRC, chunks written before it)."""
    blob = _blob(version)
    assert blob[0] == version
    decode(blob)
    for cut in range(len(blob)):
        with pytest.raises(ValueError, match=r"corrupt chunk|too short"):
            decode(blob[:cut])
    with pytest.raises(ValueError, match="corrupt chunk"):
        decode(blob + b"\0")
    rng = random.Random(1)
    for at in range(1, len(blob)):  # byte 0 is the version (the next test)
        bad = bytearray(blob)
        bad[at] ^= 1 << rng.randrange(8)
        with pytest.raises(ValueError, match="corrupt chunk"):
            decode(bytes(bad))


def _v2_with(blob: bytes, head: bytes) -> bytes:
    """A version 2 blob with its header and directory replaced by `head`, their CRC made
    right again."""
    size = codec.directory_size(blob[:7])
    return head + struct.pack("<I", zlib.crc32(head)) + blob[size:]


@pytest.mark.parametrize("decode", [codec.decode, fast.decode], ids=["stdlib", "numpy"])
def test_a_well_formed_lie_in_a_version_2_directory_is_refused(decode):
    """Version 2: a directory whose CRC is right but which lies about the blob."""
    blob = _blob()
    size = codec.directory_size(blob[:7])
    head = blob[: size - 4]
    with pytest.raises(ValueError, match=r"chunk format version 3 is unknown.*upgrade reslog"):
        decode(_v2_with(blob, bytes([3]) + head[1:]))
    n = struct.unpack_from("<I", head, 3)[0]
    for wrong_n in (n - 1, n + 1, 0):
        with pytest.raises(ValueError, match="corrupt chunk"):
            decode(_v2_with(blob, head[:3] + struct.pack("<I", wrong_n) + head[7:]))
    # a stream's length off by one: the streams no longer end where the blob does
    entry = bytearray(head)
    struct.pack_into("<I", entry, 7 + 1, struct.unpack_from("<I", head, 7 + 1)[0] + 1)
    with pytest.raises(ValueError, match="streams end at byte"):
        decode(_v2_with(blob, bytes(entry)))
    # a stream kind no version knows, in the first value column's entry (after the ids)
    entry = bytearray(head)
    entry[7 + 3 * 9] = 9
    with pytest.raises(ValueError, match="unknown stream kind 9"):
        decode(_v2_with(blob, bytes(entry)))
    # a stream's CRC that is not its payload's: only a reader of that stream notices
    entry = bytearray(head)
    entry[7 + 4 * 9 + 5] ^= 1  # the second value column's CRC
    bad = _v2_with(blob, bytes(entry))
    assert decode(bad, [0]).values[0].tobytes() == decode(blob, [0]).values[0].tobytes()
    with pytest.raises(ValueError, match=r"CRC-32 does not match.*value column 2 stream"):
        decode(bad, [1])
    with pytest.raises(ValueError, match=r"CRC-32 does not match.*value column 2"):
        codec.unpack(bad)  # reslog check reads every stream


@pytest.mark.parametrize("decode", [codec.decode, fast.decode], ids=["stdlib", "numpy"])
def test_version_1_chunks_read_to_the_bit(decode):
    """Chunks written before version 2 (on users' disks) read as they did."""
    v1, v2 = _blob(1), _blob(2)
    assert v1 != v2 and v1[0] == 1
    a, b = decode(v1), decode(v2)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, tuple):
            assert [c.tobytes() for c in x] == [c.tobytes() for c in y]
        else:
            assert x.tobytes() == y.tobytes()
    assert decode(v1, [1]).values[0].tobytes() == b.values[1].tobytes()
    assert codec.describe(v1)["version"] == 1 and codec.describe(v2)["version"] == 2
    assert fast.encode(a.steps, a.walls, *a.values, ids=a.ids, version=1) == v1


def pack3(times: tuple, values: tuple) -> bytes:
    """A 3-point blob of the given streams: `times` for steps and walls, `values` one column."""
    return codec.pack(3, times, times, None, [values])


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize("decode", [codec.decode, fast.decode], ids=["stdlib", "numpy"])
def test_a_well_formed_lie_is_refused_too(decode):
    """Blobs whose CRC is right but whose contents are not a chunk of this format (version 1:
    the whole blob's CRC)."""
    blob = _blob(1, ids=False)
    body = blob[:-4]
    with pytest.raises(ValueError, match=r"chunk format version 3 is unknown.*upgrade reslog"):
        decode(_with_crc(bytes([3]) + body[1:]))
    with pytest.raises(ValueError, match="chunk format version 0 is unknown"):
        decode(_with_crc(bytes([0]) + body[1:]))
    n = struct.unpack_from("<I", body, 3)[0]
    for wrong_n in (n - 1, n + 1, 0):
        with pytest.raises(ValueError, match="corrupt chunk"):
            decode(_with_crc(body[:3] + struct.pack("<I", wrong_n) + body[7:]))
    with pytest.raises(ValueError, match="no value column"):
        decode(_with_crc(bytes([1, 0]) + body[2:]))
    with pytest.raises(ValueError, match="unknown flags 0x2"):
        decode(_with_crc(body[:2] + bytes([2]) + body[3:]))
    with pytest.raises(ValueError, match="corrupt chunk"):  # ids flagged but none there
        decode(_with_crc(body[:2] + bytes([1]) + body[3:]))
    # a stream kind no version knows
    kind_at = codec.HEADER.size
    with pytest.raises(ValueError, match="unknown stream kind 9"):
        decode(_with_crc(body[:kind_at] + bytes([9]) + body[kind_at + 1 :]))
    # a decimal stream where integers belong (the steps), or inside a decimal stream
    with pytest.raises(ValueError, match="a decimal stream where integers belong"):
        decode(
            codec.pack(
                3,
                (DECIMAL, b"\0\x01" + b"\0" * 16),
                (LINEAR, b"\0" * 16),
                None,
                [(LINEAR, b"\0" * 16)],
            )
        )
    with pytest.raises(ValueError, match=r"decimal stream of 10\^0, kind 6"):
        decode(pack3((LINEAR, b"\0" * 16), (DECIMAL, b"\0\x06\0\x01" + b"\0" * 16)))
    # a decimal stream of an exponent no encoder writes, or a cut header
    with pytest.raises(ValueError, match=r"decimal stream of 10\^13"):
        decode(pack3((LINEAR, b"\0" * 16), (DECIMAL, b"\x0d\x01" + b"\0" * 16)))
    with pytest.raises(ValueError, match="decimal stream is too short"):
        decode(pack3((LINEAR, b"\0" * 16), (DECIMAL, b"\x01")))
    # a linear stream that is not 16 bytes
    short = pack3((LINEAR, b"\0" * 15), (LINEAR, b"\0" * 15))
    with pytest.raises(ValueError, match="not 16 bytes"):
        decode(short)
    # a deflated stream holding the wrong number of bytes
    words = codec.deflate(b"\0" * 8 * 4)
    with pytest.raises(ValueError, match="holds more than its 24 bytes"):
        decode(pack3((SHUFFLE, words), (SHUFFLE, words)))
    with pytest.raises(ValueError, match="holds 16 bytes, not 24"):
        decode(pack3(*[(SHUFFLE, codec.deflate(b"\0" * 16))] * 2))
    with pytest.raises(ValueError, match="corrupt chunk"):
        decode(pack3((SHUFFLE, b"not deflate"), (SHUFFLE, b"not deflate")))
    with pytest.raises(ValueError, match="too short"):
        decode(b"")


@pytest.mark.parametrize("encode", [codec.encode, fast.encode], ids=["stdlib", "numpy"])
def test_bad_columns_are_refused_with_one_clear_line(encode):
    with pytest.raises(ValueError, match="one length: 2 steps, 1 walls"):
        encode([1, 2], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="one length"):
        encode([1, 2], [1.0, 2.0], [1.0, 2.0], [3.0])
    with pytest.raises(ValueError, match="1 to 255 value columns, not 0"):
        encode([1], [1.0])
    with pytest.raises(ValueError, match="int64's range"):
        encode([1 << 63], [1.0], [1.0])
    with pytest.raises(ValueError, match="integers"):
        encode([1.5], [1.0], [1.0])


@pytest.mark.integration
def test_the_agent_archive_carries_the_codec_and_it_runs_without_numpy(tmp_path):
    """The archive's codec, under `python -I -S` (no site-packages: no numpy) and under the
    oldest Python the agent supports, writes the bytes numpy writes and reads them back."""
    from tests.reslog.agent.test_agent import _old_python

    archive = tmp_path / "agent.pyz"
    archive.write_bytes(bundle.archive())
    assert "schema/store/chunk_codec.py" in zipfile.ZipFile(archive).namelist()
    rng = np.random.default_rng(3)
    n = 5000
    steps = np.cumsum(rng.integers(0, 3, n)) - 40
    walls = 1.764e9 + np.cumsum(rng.random(n))
    values = np.frombuffer(rng.bytes(8 * n), dtype=np.float64)  # NaN payloads and all
    expected = fast.encode(steps, walls, values, values[::-1].copy())
    script = (
        "import sys, zlib\n"
        f"sys.path.insert(0, {str(archive)!r})\n"
        "from schema.store import chunk_codec as c\n"
        "assert 'numpy' not in sys.modules\n"
        "got = c.decode(sys.stdin.buffer.read())\n"
        "sys.stdout.buffer.write(c.encode(got.steps, got.walls, *got.values))\n"
        "sys.stderr.write(zlib.ZLIB_RUNTIME_VERSION)\n"
    )
    for python in (sys.executable, _old_python()):
        done = subprocess.run(
            [python, "-I", "-S", "-c", script], input=expected, capture_output=True, timeout=120
        )
        assert done.returncode == 0, done.stderr.decode()
        back = fast.decode(done.stdout)
        assert back.steps.tolist() == steps.tolist()
        assert back.walls.tobytes() == walls.tobytes()
        assert [v.tobytes() for v in back.values] == [values.tobytes(), values[::-1].tobytes()]
        if done.stderr.decode() == zlib.ZLIB_RUNTIME_VERSION:  # deflate's bytes are zlib's own
            assert done.stdout == expected


@pytest.mark.slow
@pytest.mark.parametrize("module", ["zlib", "zlib_ng"])
def test_zlib_ng_and_the_stdlib_zlib_read_the_same_bits_and_refuse_the_same_lies(
    monkeypatch, module
):
    """Readers inflate and check CRCs through zlib-ng where it is installed (reslog's analysis
    and gui extras), else through the standard library's zlib (the agent): the same bits back
    and the same errors either way. Deflate is zlib's in both (the format's reference bytes)."""
    from zlib_ng import zlib_ng

    from schema.store import chunk_layout

    assert chunk_layout._reading_zlib is zlib_ng  # installed here: what reslog.open() reads with
    monkeypatch.setattr(chunk_layout, "_reading_zlib", zlib if module == "zlib" else zlib_ng)
    for kinds in KINDS:
        test_random_bit_patterns_come_back_to_the_bit(kinds)
    test_nan_payloads_infinities_signed_zero_and_subnormals_each_keep_their_bits()
    for decode in (codec.decode, fast.decode):
        for version in (1, 2):
            test_every_cut_and_every_flipped_byte_raises_value_error(decode, version)
        test_a_well_formed_lie_in_a_version_2_directory_is_refused(decode)
        test_a_well_formed_lie_is_refused_too(decode)
    data = bytes(range(256)) * 40
    assert codec.crc32(data) == zlib.crc32(data)
    assert codec.inflate(codec.deflate(data), len(data)) == data


def test_a_long_stream_is_a_deflate_block_a_byte_plane_which_any_inflater_reads():
    """deflate() ends a deflate block after each byte plane of a stream of at least
    PLANE_BLOCKS_FROM points, so a plane of noise (a float's low mantissa bytes) is stored as
    it is, at a byte a byte, instead of sharing one Huffman table with the planes that
    compress; shorter streams stay one block. Either is plain raw deflate."""
    from zlib_ng import zlib_ng

    def one_block(planes: bytes) -> bytes:
        z = zlib.compressobj(codec.LEVEL, zlib.DEFLATED, -15)
        return z.compress(planes) + z.flush()

    rng = random.Random(7)
    for n in (codec.PLANE_BLOCKS_FROM, 4 * codec.PLANE_BLOCKS_FROM + 3):
        noise = rng.randbytes(6 * n)
        planes = noise + bytes(n) + b"\x3f" * n  # six noise planes, a zero plane, an exponent
        blocks = codec.deflate(planes)
        for inflater in (zlib, zlib_ng):
            assert inflater.decompress(blocks, -15) == planes
        assert codec.inflate(blocks, len(planes)) == planes
        whole = one_block(planes)
        # The six noise planes stored: their bytes and a few bytes of block header each.
        assert len(blocks) <= 6 * n + 6 * 8 + 64, (n, len(blocks))
        assert len(blocks) < len(whole), (n, len(blocks), len(whole))
    short = rng.randbytes(8 * (codec.PLANE_BLOCKS_FROM - 1))
    assert codec.deflate(short) == one_block(short)
