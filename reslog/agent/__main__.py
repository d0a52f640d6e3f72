"""`python -m reslog.agent`, and the entry point of the agent's zipapp."""

import sys

from reslog.agent.serve import main

sys.exit(main())
