"""Random mode's ledger recomputed for many batches at once: torch's CPU generator, replayed in numpy.

A random-mode batch (random_mixer.py) seeds a torch.Generator with derive_seed(seed, step, rank) and draws
  1. torch.multinomial(p(step), B, replacement=True): per row one double u = (r64 & (2**53 - 1)) * 2**-53,
     r64 = (first word << 32) | second word, and the row's source is the first whose cumulative weight (the
     sums in name order, divided by their total) is >= u;
  2. per source with k rows, in name order, torch.randint(0, n, (k,)): word % n per number, a 64-bit r64 % n
     when n >= RANDINT_64 (torch 2.13's CPU kernel);
where a word is the next output of mt19937 seeded with the 32-bit seed (the generator torch's CPU generator is).
`replay_digests(loader, first, last, rank, schedule)` computes those words for a whole chunk of steps at once
(the 624-word seeding of every step's generator side by side, one twist, the tempering), the draws from them,
each batch's record as one row of int64 and its ledger.batch_digest: no torch call and no Python per row, one
blake2b call per batch (~2 us for B = 64). It covers sources whose draw is one such randint mapped by a function
of the numbers alone (`uniform_draw()`: pretrain windows, SFT items), with 2 <= B and 3B words at most 624 (4B
with 64-bit numbers; B = 1 draws its one sample another way); for anything else it returns None and the caller
draws batch by batch. random_mixer.batch_digests checks it against torch's own draws on the first and the last
batch of every call and at each breakpoint inside, so a torch whose generator or kernels differ falls back to
the draws torch makes rather than computing another history.
"""

from __future__ import annotations

import hashlib

import numpy as np

from niels_gpt.training.ledger import DIGEST_BYTES, name_id

RANDINT_64 = 1 << 28  # measured on torch 2.13 CPU: randint over a range this large or larger takes 2 words a number
CHUNK = 16_384  # steps whose generators are seeded side by side: 624 words each, 40 MB
_STATE = 624
_U32 = np.uint32
_MASK64 = np.uint64((1 << 64) - 1)
_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def derive_seeds(seed: int, steps: np.ndarray, rank: int) -> np.ndarray:
    """sampling.derive_seed(seed, step, rank) of every step, as uint32."""
    from niels_gpt.sampling import splitmix64

    with np.errstate(over="ignore"):
        h = _splitmix64(np.uint64(splitmix64(seed & ((1 << 64) - 1))) ^ steps.astype(np.uint64))
        folded = (h ^ (h >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
        return ((folded + np.uint64(rank)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def mt_words(seeds: np.ndarray, n: int) -> np.ndarray:
    """The first n (<= 624) outputs of mt19937 seeded with each of `seeds` (uint32): (len(seeds), n) uint32. The
    seeding runs word by word over all seeds at once (one contiguous row a word), up to the last word the first
    n outputs use; only those are kept: 0..n and 397..623."""
    S = len(seeds)
    low = np.empty((n + 1, S), dtype=np.uint32)  # state words 0..n
    high = np.empty((_STATE - 397, S), dtype=np.uint32)  # state words 397..623
    scratch = np.empty((2, S), dtype=np.uint32)
    shifted = np.empty(S, dtype=np.uint32)
    previous = low[0]
    previous[:] = seeds
    top = _STATE - 1 if n > 227 else 396 + n  # the last state word the outputs use
    for j in range(1, top + 1):
        word = high[j - 397] if j >= 397 else low[j] if j <= n else scratch[j & 1]
        np.right_shift(previous, _U32(30), out=shifted)
        np.bitwise_xor(previous, shifted, out=word)
        word *= _U32(1812433253)
        word += _U32(j)
        if 397 <= j <= n:
            low[j] = word
        previous = word
    twisted = np.empty((n, S), dtype=np.uint32)
    for lo in range(0, n, 227):  # outputs 227.. take the words twisted before them
        hi = min(n, lo + 227, _STATE - 1)
        y = (low[lo:hi] & _U32(0x80000000)) | (low[lo + 1 : hi + 1] & _U32(0x7FFFFFFF))
        far = high[lo:hi] if lo == 0 else twisted[lo - 227 : hi - 227]
        twisted[lo:hi] = far ^ (y >> _U32(1)) ^ np.where(y & _U32(1), _U32(0x9908B0DF), _U32(0))
    if n == _STATE:  # the last word wraps round to the first, twisted
        y = (high[-1] & _U32(0x80000000)) | (twisted[0] & _U32(0x7FFFFFFF))
        twisted[-1] = twisted[396] ^ (y >> _U32(1)) ^ np.where(y & _U32(1), _U32(0x9908B0DF), _U32(0))
    y = twisted
    y ^= y >> _U32(11)
    y ^= (y << _U32(7)) & _U32(0x9D2C5680)
    y ^= (y << _U32(15)) & _U32(0xEFC60000)
    y ^= y >> _U32(18)
    return np.ascontiguousarray(y.T)


def _weights(schedule, first: int, last: int) -> np.ndarray:
    """The float mixture of every step first..last-1 as random mode draws it (Schedule.at), (steps, K)."""
    out = np.empty((last - first, len(schedule.names)), dtype=np.float64)
    step = first
    while step < last:
        stop = min(last, schedule.next_breakpoint(step))
        ramp = schedule.ramp(step)
        if ramp is None:  # the breakpoint's weights until the next (a flat stretch) or for this step
            upto = stop if schedule.ramp(stop - 1) is None else step + 1
            out[step - first : upto - first] = list(schedule.at(step).values())
            step = upto
            continue
        start, end, a, b, total = ramp
        t = np.arange(step, stop, dtype=np.int64)[:, None]
        ints = (end - t) * np.asarray(a, dtype=np.int64) + (t - start) * np.asarray(b, dtype=np.int64)
        out[step - first : stop - first] = ints / total  # int / int, correctly rounded: as at() divides
        step = stop
    return out


def replay_digests(loader, first: int, last: int, *, rank: int, schedule) -> bytes | None:
    """The ledger.batch_digest of random-mode batches first..last-1 of `loader` on `rank` under `schedule` (as
    random_mixer.batch_digests gives them), computed a chunk of steps at a time; None where this does not apply."""
    B, names = loader.B, schedule.names
    draws = []
    for name in names:
        source = loader.sources.get(name)
        draw = getattr(source, "uniform_draw", None)
        draw = draw() if draw is not None else None
        if draw is None:
            return None
        draws.append(draw)
    windows = [locate is not None for _, locate in draws]
    if B < 2 or len(set(windows)) > 1 or B * (2 + max(2 if n >= RANDINT_64 else 1 for n, _ in draws)) > _STATE:
        return None  # one row: torch.multinomial draws a single sample another way (exponential keys)
    out = []
    for start in range(first, last, CHUNK):
        out.append(_chunk(loader, schedule, draws, windows[0], start, min(last, start + CHUNK), rank))
    return b"".join(out)


def _chunk(loader, schedule, draws, windowed: bool, first: int, last: int, rank: int) -> bytes:
    B, K, S = loader.B, len(schedule.names), last - first
    wide = [n >= RANDINT_64 for n, _ in draws]
    words = mt_words(derive_seeds(loader.seed, np.arange(first, last), rank), B * (2 + max(wide) + 1))
    pairs = words[:, : 2 * B].astype(np.uint64)
    r64 = (pairs[:, 0::2] << np.uint64(32)) | pairs[:, 1::2]
    u = (r64 & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0**-53
    cum = np.cumsum(_weights(schedule, first, last), axis=1)
    cum /= cum[:, -1:]
    which = np.zeros((S, B), dtype=np.int64)  # the first source whose cumulative weight is >= u
    for k in range(K - 1):
        which += u > cum[:, k : k + 1]
    row_k = (np.arange(S) * K)[:, None]  # flat index of each step's first source in (S, K) arrays
    counts = np.bincount((which + row_k).ravel(), minlength=S * K).reshape(S, K)
    before = np.cumsum(counts, axis=1) - counts  # rows of the sources before k
    per_row = np.where(wide, 2, 1)
    word_before = 2 * B + np.cumsum(counts * per_row, axis=1) - counts * per_row
    ordered = np.sort(which, axis=1, kind="stable")  # each source's rows together, in name order
    flat = ordered + row_k
    first_row = before.ravel()[flat]
    r = np.arange(B)[None, :] - first_row  # the row's number among its source's
    at = word_before.ravel()[flat] + r * per_row[ordered] + (np.arange(S) * words.shape[1])[:, None]
    low = words.ravel()[at].astype(np.uint64)
    if any(wide):
        high = words.ravel()[np.minimum(at + 1, words.size - 1)].astype(np.uint64)
        low = np.where(np.asarray(wide)[ordered], (low << np.uint64(32)) | high, low)
    ranges = np.asarray([n for n, _ in draws], dtype=np.uint64)
    number = (low % ranges[ordered]).astype(np.int64)
    ids = np.asarray([name_id(n) for n in schedule.names], dtype=np.int64)
    record = np.empty((S, 3 * B if windowed else 2 * B), dtype=np.int64)
    record[:, :B] = ids[which]
    if windowed:
        array, start = np.empty_like(number), np.empty_like(number)
        for k, (_, locate) in enumerate(draws):
            mine = ordered == k
            if mine.any():
                array[mine], start[mine] = locate(number[mine])
        base = B + 2 * first_row
        count = counts.ravel()[flat]
        steps = np.arange(S)[:, None]
        record[steps, base + r] = array
        record[steps, base + count + r] = start
    else:
        record[:, B:] = number
    blake2b, size, width = hashlib.blake2b, DIGEST_BYTES, record.shape[1] * 8
    data = memoryview(record).cast("B")
    return b"".join(blake2b(data[k : k + width], digest_size=size).digest() for k in range(0, len(data), width))
