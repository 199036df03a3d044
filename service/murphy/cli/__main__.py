"""``python -m murphy.cli``."""

import sys

from murphy.cli import main

sys.exit(main())
