"""``python -m rule_quality`` (from ``benchmarks/``) is ``run.py``."""

from __future__ import annotations

from .run import main

main()
