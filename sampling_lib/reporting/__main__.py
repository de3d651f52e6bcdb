"""``python -m sampling_lib.reporting run ...``: the report runner (same as ``python -m sampling_lib run``)."""
import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
