"""`python -m resplot` = the `resplot` command."""

import sys

from resplot.cli import main

sys.exit(main())
