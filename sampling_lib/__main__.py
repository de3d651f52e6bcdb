"""``python -m sampling_lib run [--smoke] [--only NN] [--out DIR] [--jobs J]``: the report runner.

Same as ``python -m sampling_lib.reporting``, without runpy's warning about a
module that the package has already imported.
"""
import sys

from .reporting import main

if __name__ == "__main__":
    sys.exit(main())
