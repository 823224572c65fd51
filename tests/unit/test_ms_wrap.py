"""The u32 millisecond wrap rule (issue 14): the scalar form used by LogFile and
Follower and the numpy form used by the bulk readers are one rule, so a record's time
is the same whichever reader decodes it."""

from __future__ import annotations

import random

import numpy as np

from nblog.reader._file.wrap import unwrap_ms, unwrap_ms_array

TURN = 1 << 32
HALF = 1 << 31


def loop(ms32: list[int], start: int) -> list[int]:
    out, ref = [], start
    for m in ms32:
        ref = unwrap_ms(m, ref)
        out.append(ref)
    return out


def check(ms32: list[int], start: int) -> None:
    got = unwrap_ms_array(np.array(ms32, dtype=np.uint32), start)
    assert got.dtype == np.int64
    assert got.tolist() == loop(ms32, start)
    assert all(v >= 0 for v in got.tolist())
    assert [v & (TURN - 1) for v in got.tolist()] == ms32


def test_scalar_edge_cases() -> None:
    assert unwrap_ms(5, 0) == 5
    assert unwrap_ms(5, TURN - 10) == TURN + 5  # just past the wrap
    assert unwrap_ms(TURN - 10, TURN + 5) == TURN - 10  # slightly behind, across it
    assert unwrap_ms(TURN - 1, 3) == TURN - 1  # would go below 0: one turn later
    assert unwrap_ms(HALF, 0) == HALF  # a gap of exactly 2**31 is kept
    assert unwrap_ms(0, HALF) == 0
    assert unwrap_ms(7, 3 * TURN + 100) == 3 * TURN + 7
    assert unwrap_ms(TURN - 1, 3 * TURN + 100) == 3 * TURN - 1


def test_array_agrees_with_scalar_on_edges() -> None:
    for start in (0, 1, HALF - 1, HALF, HALF + 1, TURN - 1, TURN, TURN + HALF, 5 * TURN + 3):
        for seq in (
            [],
            [0],
            [TURN - 1],
            [HALF, 0, HALF, TURN - 1, 0, 1],
            [TURN - 5, TURN - 1, 2, 3, TURN - 2, 4],  # wrap with a straggler behind it
            [TURN - 1, 0, TURN - 1, 0],
            [HALF - 1, TURN - 1, HALF + 1, 0],
            [3, TURN - 1, TURN - 2, 5],  # goes below 0, taken one turn later, stays there
        ):
            check(seq, start)


def test_array_agrees_with_scalar_random() -> None:
    rng = random.Random(14)
    for _ in range(400):
        start = rng.choice([0, rng.randrange(TURN), rng.randrange(8 * TURN)])
        cur = start
        seq = []
        for _ in range(rng.randrange(1, 60)):
            kind = rng.random()
            if kind < 0.6:
                cur += rng.randrange(0, 1 << 30)  # forward, often across a wrap
            elif kind < 0.8:
                cur = max(0, cur - rng.randrange(0, 1 << 20))  # a little behind
            else:
                cur = rng.randrange(8 * TURN)  # anything, edges of the rule
            seq.append(cur & (TURN - 1))
        check(seq, start)
        # any u32 values at all
        check([rng.choice([0, HALF, TURN - 1, rng.randrange(TURN)]) for _ in range(30)], start)


def test_bulk_decoder_uses_the_same_rule() -> None:
    """LogFile's bulk decoding placed a value that went below 0 at -1 ms while Follower
    placed it one turn later: now both use the one rule."""
    from nblog.reader._file.logfile import _unwrap

    seq = [3, TURN - 1, TURN - 2, 5]
    assert _unwrap(np.array(seq, dtype=np.uint32), 0).tolist() == loop(seq, 0) == [3, TURN - 1, TURN - 2, TURN + 5]
