"""murphy: watch a training job while it runs and stop it the moment it goes wrong.

The package is layered (see docs/architecture.md); nothing happens at import time.
"""

__version__ = "0.1.0"
