"""Shared timer of the benchmark scripts (imported as ``from _timing import best_of``)."""
import time


def best_of(f, repeat=3):
    """Run ``f()`` ``repeat`` times; return (best wall time in seconds, last result)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out
