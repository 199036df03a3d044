"""Authentication for ``murphy server --auth sigv4``: access keys (:mod:`murphy.auth.keys`), the
SigV4 computation (:mod:`murphy.auth.sigv4`) and the verifier (:mod:`murphy.auth.verifier`).
The ASGI side is :mod:`murphy.api.edge`; docs/security.md has the threat model."""
