"""`python scripts/sweep.py ...` is `jaxppo sweep ...`."""

import sys

from jaxppo.cli import main

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
