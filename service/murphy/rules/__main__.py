"""``python -m murphy.rules``: the rule container entry point (same as ``murphy rule-eval``)."""

import sys

from murphy.rules.entrypoint import main

sys.exit(main())
