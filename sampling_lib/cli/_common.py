"""Shared pieces of the command line: the one-line errors, argument types, output helpers."""
from __future__ import annotations

import argparse
import re
import sys

__all__ = ["PROG", "CLIError", "UsageError", "Parser", "nonneg_int", "int_in", "float_in", "emit", "write",
           "check_output", "inputs",
           "boot_count", "progress_on", "cut", "one_line"]

PROG = "sampling-lib"


class CLIError(Exception):
    """A user-facing error: printed as one line (exit status 1)."""


class UsageError(CLIError):
    """A bad command line found after parsing (options that do not go together): exit status 2, as argparse's."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        sys.stderr.write(f"{PROG}: error: {cut(message)} (see '{self.prog} --help')\n")
        raise SystemExit(2)


def nonneg_int(text):
    """argparse type of a seed: an integer >= 0 (argparse names the option in its error)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {cut(text)!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0; got {v}")
    return v


_INT64_MAX = 2**63 - 1


def int_in(low, high=_INT64_MAX):
    """argparse type: an integer in low..high (the library's counts are int64)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}; got {cut(text)!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}; got {cut(v)}")
        return v
    parse.__name__ = "integer"
    return parse


def float_in(low, high, low_open=False, high_open=False):
    """argparse type: a number in the interval low..high (each end open or closed, as the message says)."""
    shown = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def parse(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number in {shown}; got {cut(text)!r}") from None
        if not ((v > low if low_open else v >= low) and (v < high if high_open else v <= high)):
            raise argparse.ArgumentTypeError(f"must be a number in {shown}; got {cut(text)}")
        return v
    parse.__name__ = "number"
    return parse


def share(text):
    """argparse type of a budget: a share of full ranking in (0, 1], as 0.05 or 5%."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100.0 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1] such as 0.05 or 5%; got {cut(text)!r}") from None
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1] such as 0.05 or 5%; got {cut(text)!r}")
    return v


share.__name__ = "share"


def assurance(text):
    """argparse type of the planner's assurance: a probability in [0.5, 1)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a probability in [0.5, 1) such as 0.9; got {cut(text)!r}") from None
    if not 0.5 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be a probability in [0.5, 1) such as 0.9; got {cut(text)!r}")
    return v


def growth(text):
    """argparse type of a ladder's growth factor: a number in (1, 1024] (2: TORS24's doubling), as
    :func:`sampling_lib.sampling.check_growth` allows."""
    from ..sampling import check_growth

    try:
        return check_growth(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (1, 1024] such as 2 or 1.5; got {cut(text)!r}") from None


def emit(text, output):
    if output:
        with open(output, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def write(df, fmt, output):
    """A table as csv, json or a plain text table (plan-users; estimate/compare go through _show)."""
    if fmt == "csv":
        text = df.to_csv(index=False)
    elif fmt == "json":
        text = df.to_json(orient="records", indent=2) + "\n"
    else:
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 100):
            text = df.to_string(index=False, float_format=lambda x: f"{x:.4f}") + "\n"
    emit(text, output)


#: The options that name files the command writes
OUTPUT_OPTIONS = ("output", "plot")


def inputs(args):
    """Every text value of the command line but its outputs (for the -o check): each may name an input file.
    Taken from all options rather than a list of names, which had missed plan's pilot and negatives' --items."""
    files = []
    for opt, v in vars(args).items():
        if opt in OUTPUT_OPTIONS:
            continue
        if isinstance(v, str):
            files.append(v)
        elif isinstance(v, (list, tuple)):
            files.extend(x for x in v if isinstance(x, str))
    return files


def _same_file(a, b):
    """True when the paths ``a`` and ``b`` name one file: the same path once links are followed (also a
    link to a file not written yet), or, both existing, the same inode (a hard link)."""
    import os

    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _option_name(opt):
    return "-o/--output" if opt == "output" else f"--{opt}"


def check_output(args):
    """The files the command writes (-o, --plot): none an empty path, no two the same file (also through
    links), and none an input file: writing there would destroy the input or the other output."""
    outs = [(opt, getattr(args, opt)) for opt in OUTPUT_OPTIONS if getattr(args, opt, None) is not None]
    for opt, out in outs:
        if not str(out).strip():
            raise CLIError(f"{_option_name(opt)} must name a file; got an empty path (omit the option to write the "
                           "table to stdout)" if opt == "output" else
                           f"{_option_name(opt)} must name a file; got an empty path")
    for i, (opt, out) in enumerate(outs):
        for opt2, out2 in outs[i + 1:]:
            if _same_file(out, out2):
                raise CLIError(f"{_option_name(opt)} {out} and {_option_name(opt2)} {out2} name the same file: one "
                               "would overwrite the other; give two different files")
    import os

    for opt, out in outs:
        for f in inputs(args):     # every text value of the command line: only an existing file is an input
            if f and os.path.exists(f) and _same_file(out, f):
                raise CLIError(f"{_option_name(opt)} {out} is the input file {f}: refusing to overwrite an input; "
                               "choose another output file")


def boot_count(args, popularity=False):
    return args.n_boot if args.n_boot is not None else 1000


def progress_on(args):
    """Progress on stderr unless --quiet: a bar on a terminal, plain lines otherwise (sampling_lib._progress)."""
    return not getattr(args, "quiet", False)


_MAX_MESSAGE = 300


_NUMPY_REPR = re.compile(r"np\.(?:float|int|uint|complex|bool|str)_?\d*\(([^()]*)\)")


def cut(text, limit=_MAX_MESSAGE):
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def one_line(exc):
    """One line of at most ~300 characters, numpy scalar reprs shown as plain values."""
    msg = str(exc).strip() or type(exc).__name__
    if isinstance(exc, KeyError):
        msg = f"missing key {msg}"
    msg = " ".join(msg.splitlines()[0].split())
    return cut(_NUMPY_REPR.sub(r"\1", msg))

