"""``python -m murphy.container``: run one training container's toolkit."""

import sys

from murphy.container.toolkit import main

sys.exit(main())
