"""Train one config, printing progress and the final return: same as `jaxppo train`."""

import sys

from jaxppo.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
