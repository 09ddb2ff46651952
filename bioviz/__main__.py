"""Entry point for ``python -m bioviz``."""

import sys

from bioviz.cli import main

if __name__ == "__main__":
    sys.exit(main())
