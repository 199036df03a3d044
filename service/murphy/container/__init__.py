"""The in-container training toolkit (``python -m murphy.container``).

It plays the part of SageMaker's training toolkit and platform inside one training container:
reads ``/opt/ml`` (``$MURPHY_OPT_ML``), downloads the channels, runs the program (script mode or
a fixed command), mirrors the hook's tensors to the job's ``debug-output`` while it runs and
uploads the model artifacts at the end. Only the standard library and murphy's storage layer
are used, so it runs in any image that has murphy installed. See ``docs/runtimes.md``.
"""
