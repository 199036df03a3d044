"""Where a job's containers run: ``process`` (embedded default), ``fake`` (unit tests)."""
