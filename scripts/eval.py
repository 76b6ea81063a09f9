"""`python scripts/eval.py ...` is `jaxppo eval ...`."""

import sys

from jaxppo.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", *sys.argv[1:]]))
