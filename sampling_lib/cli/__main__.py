"""``python -m sampling_lib.cli``: the ``sampling-lib`` command (as ``python -m sampling_lib``)."""
import sys

from . import main

__all__ = []

if __name__ == "__main__":
    sys.exit(main())
