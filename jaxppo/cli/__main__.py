"""`python -m jaxppo.cli ...`: the `jaxppo` command."""

import sys

from jaxppo.cli.app import main

sys.exit(main())
