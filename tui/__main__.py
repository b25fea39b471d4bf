"""`python -m tui DIR`: the replay app without the minisgl command (the tui imports only tracer)."""

import sys

from tui.launch import main

sys.exit(main())
