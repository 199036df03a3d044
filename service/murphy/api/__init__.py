"""murphy's HTTP API (FastAPI): SageMaker's and CloudWatch Logs' AWS JSON 1.1 protocol on
``POST /``, a REST mirror under ``/v1``, ``/healthz`` and ``/metrics``.

Build it with :func:`murphy.api.app.create_app` (nothing is created at import time).
"""
