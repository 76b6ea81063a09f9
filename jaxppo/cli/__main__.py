"""`python -m jaxppo.cli ...`: the `jaxppo` command."""

import sys

from jaxppo.cli.main import main

sys.exit(main())
