"""``python -m sampling_lib``: the ``sampling-lib`` command (estimate, compare, plan-users, negatives, run).

``python -m sampling_lib estimate ranks.csv -N 3706 -n 100`` is ``sampling-lib
estimate ...`` (:func:`sampling_lib.cli.main`); ``python -m sampling_lib run
...`` goes straight to the report runner (:mod:`sampling_lib.reporting`),
without importing the estimators first.
"""
import sys


def main(argv=None):
    """Entry point of ``python -m sampling_lib``; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run"]:
        from .cli import run_main

        return run_main(argv)
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
