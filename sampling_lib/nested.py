"""Nested negatives that need no memory: each user's sets are prefixes of one seeded random order.

A nested design (a second stage, the ladder of TORS24 Algorithm 1) draws for
user u distinct negatives from its C_u = N_u - 1 candidates (the items that are
neither its held-out item nor in its history), and every later stage adds
items not drawn before, so that the merged set is a uniform sample of distinct
items of its final size (the hypergeometric kernel at the final (n_u, r_u)).
Equivalently: fix one uniformly random order of the candidates and give the
user, at set size s, the first s - 1 items of that order. Then the items of
any stage are a slice of the order, computed from the user's key and the
positions alone: a stage keeps no earlier negatives in memory to avoid them,
and a run can be resumed, saved or re-written from its seed at any time.

The order is a keyed pseudorandom permutation of 0..C_u - 1 (the positions
in the user's candidate list), mapped to item ids by skipping the excluded
ones (:func:`candidate_items`):

* C_u <= :data:`EXPLICIT_MAX`: an explicit uniform permutation, the argsort
  of C_u uniforms of the user's own ``numpy.random.Generator`` stream
  (exactly uniform);
* larger C_u: an alternating Feistel network on b = ceil(log2 C_u) bits
  (halves of floor(b/2) and ceil(b/2) bits, :data:`ROUNDS` = 4 rounds, each
  adding a keyed integer hash of one half to the other, modulo its width:
  Wellons' ``lowbias32`` in 32-bit arithmetic up to b = 32, the SplitMix64
  finalizer above), cycle-walked into 0..C_u - 1: a bijection whatever the
  keys. The round keys are drawn from a ``numpy.random.Generator`` seeded by
  the evaluation's seed.

The Feistel order is pseudorandom, not uniform over all C_u! orders; what
the estimator needs is that a prefix of s items holds the X "items above
the held-out one" (any fixed subset of the candidates) with the
hypergeometric law. ``tests/test_nested.py`` checks that law against the
exact pmf on contiguous, strided and random subsets at many C_u, and the
inclusion of every position at every prefix length.

References
----------
.. [LR88] Luby, Rackoff. How to construct pseudorandom permutations from pseudorandom functions.
   SIAM J. Computing 17(2), 1988 (a Feistel network of pseudorandom round functions).
.. [BR02] Black, Rogaway. Ciphers with arbitrary finite domains. CT-RSA 2002 (cycle walking).
.. [BRS10] Bellare, Rogaway, Spies. The FFX mode of operation for format-preserving encryption (2010)
   (alternating, unbalanced Feistel networks).
.. [SLF14] Steele, Lea, Flood. Fast splittable pseudorandom number generators. OOPSLA 2014
   (the SplitMix64 finalizer).
.. [Wel18] Wellons. Prospecting for hash functions (2018), https://nullprogram.com/blog/2018/07/31/
   (``lowbias32``).
.. [TORS24] Li, Jin, Liu, Ren, Gao, Liu. On Item-Sampling Evaluation for Recommender System.
   ACM TORS 2024, Algorithm 1 (the ladder).
"""
from __future__ import annotations

import numpy as np

from ._arrays import user_blocks

__all__ = ["NestedOrder", "EXPLICIT_MAX", "ROUNDS", "CandidateMap", "candidate_items"]

#: Candidate lists up to this length get an explicit uniform permutation.
EXPLICIT_MAX = 64
#: Feistel rounds of the larger lists. Luby and Rackoff's construction needs 3 (4 for a strong
#: pseudorandom permutation); tests/test_nested.py's law checks fail with 1 or 2 rounds and pass from 3.
#: Four: the strong construction, and a third less time per pair than six (the draws are a large part of
#: evaluate's own time at 10^5 users).
ROUNDS = 4
#: Elements per pass of the network (a few arrays of this size stay in the CPU's cache).
_CHUNK = 1 << 15

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_L1 = np.uint32(0x7FEB352D)
_L2 = np.uint32(0x846CA68B)
_GOLDEN32 = np.uint32(0x9E3779B9)


def _mix(half, key, out, golden, s1, m1, s2, m2, s3):
    """out = an xorshift-multiply integer hash of ``half`` xor ``key`` (wrapping, in the dtype of the
    constants), in place: add ``golden``, then x ^= x >> s1, x *= m1, x ^= x >> s2, x *= m2, x ^= x >> s3."""
    np.bitwise_xor(half, key, out=out)
    out += golden
    out ^= out >> s1
    out *= m1
    out ^= out >> s2
    out *= m2
    out ^= out >> s3
    return out


#: The SplitMix64 finalizer ([SLF14]) and Wellons' ``lowbias32`` ([Wel18]) as :func:`_mix` constants.
_SPLITMIX64 = (_GOLDEN, np.uint64(30), _M1, np.uint64(27), _M2, np.uint64(31))
_LOWBIAS32 = (_GOLDEN32, np.uint32(16), _L1, np.uint32(15), _L2, np.uint32(16))


def _round(half, key, out):
    """out = the keyed SplitMix64 finalizer ([SLF14]) of ``half`` xor ``key`` (uint64, wrapping), in place."""
    return _mix(half, key, out, *_SPLITMIX64)


def _round32(half, key, out):
    """out = the keyed ``lowbias32`` integer hash ([Wel18]) of ``half`` xor ``key`` (uint32, wrapping), in
    place: the round function of networks of up to 32 bits (half the work of :func:`_round` per element)."""
    return _mix(half, key, out, *_LOWBIAS32)


def _feistel(x, keys, left_bits, right_bits):
    """One pass of the alternating Feistel network on (left, right) halves of x, elementwise.

    ``x`` and ``keys`` (k,) are uint64, or uint32 for networks of up to 32 bits (then :func:`_round32` is the
    round function); round i uses key + i x golden ratio. ``left_bits`` / ``right_bits`` ints: the widths of
    the halves. Round i adds the keyed mix of one half to the other, modulo the other's width: each round,
    and so the pass, is a bijection of 0..2^(left_bits + right_bits) - 1.
    """
    t = x.dtype.type
    mix, golden = (_round32, _GOLDEN32) if t is np.uint32 else (_round, _GOLDEN)
    lmask = t((1 << left_bits) - 1)
    rmask = t((1 << right_bits) - 1)
    left, right = x >> t(right_bits), x & rmask
    tmp = np.empty_like(x)
    key = keys.copy()
    for i in range(ROUNDS):
        key += golden
        if i % 2 == 0:
            left += mix(right, key, tmp)
            left &= lmask
        else:
            right += mix(left, key, tmp)
            right &= rmask
    left <<= t(right_bits)
    left |= right
    return left


class NestedOrder:
    """One seeded random order of the candidates of each user (module docstring).

    Parameters
    ----------
    n_candidates : array_like of int, shape (M,)
        C_u >= 0: the number of candidate negatives of each user (N_u - 1).
    rng : None, int, SeedSequence or numpy.random.Generator
        The round keys (and the explicit permutations' streams) come from it.

    Examples
    --------
    >>> order = NestedOrder([10, 1000], rng=0)
    >>> first = order.positions([0, 1], [0, 0], [10, 5])          # user 0: all 10; user 1: the first 5
    >>> sorted(first[:10].tolist()) == list(range(10)), len(set(first[10:].tolist()))
    (True, 5)
    >>> bool((order.positions([1], [0], [8])[:5] == first[10:]).all())   # prefixes: nested sets
    True
    """

    def __init__(self, n_candidates, rng=None):
        C = np.asarray(n_candidates, dtype=np.int64)
        if C.ndim != 1 or (C.size and C.min() < 0):
            raise ValueError("n_candidates must be a 1-D array of counts >= 0")
        self.C = C
        rng = np.random.default_rng(rng)
        self._keys = rng.integers(0, np.iinfo(np.int64).max, size=C.size, dtype=np.int64).astype(np.uint64)
        self._seeds = rng.integers(0, np.iinfo(np.int64).max, size=C.size, dtype=np.int64)
        bits = np.zeros(C.size, dtype=np.int64)
        big = C > EXPLICIT_MAX
        bits[big] = np.ceil(np.log2(C[big])).astype(np.int64)
        bits[big] += (np.int64(1) << bits[big]) < C[big]          # rounding of log2
        self._bits = bits
        self._explicit = {}

    def _small(self, u):
        """The explicit uniform permutation of a user with C_u <= EXPLICIT_MAX (cached)."""
        p = self._explicit.get(u)
        if p is None:
            p = np.argsort(np.random.default_rng(int(self._seeds[u])).random(int(self.C[u])), kind="stable")
            self._explicit[u] = p
        return p

    def at(self, users, k):
        """The candidate positions (0..C_u - 1) at places ``k`` of the users' orders, elementwise."""
        users = np.asarray(users, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        if users.shape != k.shape or users.ndim != 1:
            raise ValueError("users and k must be 1-D arrays of the same shape")
        C = self.C[users]
        if k.size and ((k < 0).any() or (k >= C).any()):
            raise ValueError("places k must lie in 0..C_u - 1 of each user")
        return self._at(users, k, C)

    def _at(self, users, k, C):
        out = np.empty(k.shape, dtype=np.int64)
        for c in range(0, k.size, _CHUNK):          # chunks that stay in the CPU's cache
            sl = slice(c, c + _CHUNK)
            out[sl] = self._chunk(users[sl], k[sl], C[sl])
        return out

    def _chunk(self, users, k, C):
        small = C <= EXPLICIT_MAX
        if small.any():
            out = np.empty(k.shape, dtype=np.int64)
            for u in np.unique(users[small]):
                sel = small & (users == u)
                out[sel] = self._small(int(u))[k[sel]]
            big = np.flatnonzero(~small)
            out[big] = self._chunk(users[big], k[big], C[big]) if big.size else out[big]
            return out
        bits = self._bits[users]
        b = int(bits[0])
        if (bits != b).any():             # one network width at a time
            out = np.empty(k.shape, dtype=np.int64)
            for b in np.unique(bits):
                sel = bits == b
                out[sel] = self._walk(users[sel], k[sel], C[sel], int(b))
            return out
        return self._walk(users, k, C, b)

    def _walk(self, users, x, C, bits):
        """Cycle walking ([BR02]): the network of ``bits`` bits applied until x < C_u (2^bits < 2 C_u, so
        under 2 passes on average); in uint32 arithmetic up to 32 bits."""
        keys = self._keys[users]
        if bits <= 32:
            keys = (keys ^ (keys >> np.uint64(32))).astype(np.uint32)
            x, C = x.astype(np.uint32), C.astype(np.uint32)
        else:
            x, C = x.astype(np.uint64), C.astype(np.uint64)
        left, right = bits // 2, bits - bits // 2
        x = _feistel(x, keys, left, right)
        todo = np.flatnonzero(x >= C)
        while todo.size:
            x[todo] = _feistel(x[todo], keys[todo], left, right)
            todo = todo[x[todo] >= C[todo]]
        return x.astype(np.int64)

    def positions(self, users, start, stop):
        """The positions of places start..stop - 1 of each user's order, users one after another.

        ``users``, ``start`` and ``stop`` are aligned arrays (one slice per entry); the result holds
        stop - start positions per entry, in order.
        """
        users = np.asarray(users, dtype=np.int64)
        start, stop = np.asarray(start, dtype=np.int64), np.asarray(stop, dtype=np.int64)
        length = stop - start
        if (length < 0).any():
            raise ValueError("stop must be >= start")
        if users.size and ((start < 0).any() or (stop > self.C[users]).any()):
            raise ValueError("places start..stop - 1 must lie in 0..C_u - 1 of each user")
        rep = np.repeat(np.arange(users.size), length)
        k = start[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(length) - length, length))
        u = users[rep]
        return self._at(u, k, self.C[u])


#: Users with at most this many excluded ids are mapped by a padded table (one comparison per excluded id)
#: instead of a binary search of every user's excluded ids.
_PADDED_MAX = 4


class CandidateMap:
    """Item ids (0..N-1) of candidate positions: position p of user u is the p-th item id (from 0) that is not
    among u's excluded ids.

    ``excluded_ptr`` (M + 1,) and ``excluded`` (sorted ids within each user's segment) hold the excluded items
    of every user in CSR form (history and held-out item). With e_j the j-th excluded id of u, the item is
    p + #{j : e_j - j <= p} (the excluded ids at or below it are skipped). The thresholds e_j - j are computed
    once, so mapping a batch costs one binary search per position, or, when no user excludes more than
    :data:`_PADDED_MAX` ids (every user's held-out item alone, say), a few comparisons with a padded table.

    Examples
    --------
    >>> CandidateMap(np.array([0, 2, 2]), np.array([1, 2])).items(np.array([0, 1, 2, 0]), np.array([0, 0, 0, 1]))
    array([0, 3, 4, 0])
    """

    def __init__(self, excluded_ptr, excluded):
        ptr = np.asarray(excluded_ptr, dtype=np.int64)
        ex = np.asarray(excluded, dtype=np.int64)
        self._ptr = ptr
        self._empty = ex.size == 0
        if self._empty:
            return
        count = np.diff(ptr)
        width = int(count.max())
        if width <= _PADDED_MAX:
            seg = np.repeat(np.arange(ptr.size - 1), count)
            shifted = ex - (np.arange(ex.size) - ptr[seg])      # e_j - j within each user's segment
            table = np.full((ptr.size - 1, width), np.iinfo(np.int64).max, dtype=np.int64)
            table[seg, np.arange(ex.size) - ptr[seg]] = shifted
            self._table, self._key = table, None
            return
        # e_j - j <= e_j < N: one bound for every user, so the key is computed in blocks of users (bounded
        # temporaries: a proxy's heads make these exclusions long)
        self._big = np.int64(int(ex.max()) + 2)
        self._key = np.empty(ex.size, np.int64)                 # sorted: users in order, non-decreasing inside
        for a, b in user_blocks(count):
            local = np.repeat(np.arange(a, b), count[a:b])
            j = np.arange(ptr[a], ptr[b]) - ptr[local]          # j within each user's segment
            self._key[ptr[a]:ptr[b]] = local * self._big + (ex[ptr[a]:ptr[b]] - j)
        self._table = None

    def items(self, positions, users):
        """The item ids of ``positions`` (0..C_u - 1) of ``users``, elementwise."""
        p = np.asarray(positions, dtype=np.int64)
        if self._empty:
            return p.copy()
        users = np.asarray(users, dtype=np.int64)
        if self._table is not None:
            rows = self._table[users]
            out = p + (rows[:, 0] <= p)
            for j in range(1, rows.shape[1]):
                out += rows[:, j] <= p
            return out
        q = users * self._big + np.minimum(p, self._big - 1)   # positions beyond every threshold count them all
        return p + (np.searchsorted(self._key, q, side="right") - self._ptr[users])


def candidate_items(positions, users, excluded_ptr, excluded):
    """Item ids (0..N-1) of candidate positions (:class:`CandidateMap`, built for one call).

    Examples
    --------
    >>> candidate_items(np.array([0, 1, 2, 0]), np.array([0, 0, 0, 1]), np.array([0, 2, 2]), np.array([1, 2]))
    array([0, 3, 4, 0])
    """
    return CandidateMap(excluded_ptr, excluded).items(positions, users)
