"""The pods' S3 keys on the Kubernetes runtime (docs/security.md, "Jobs hold only their own keys").

A pod never gets the service's S3 credentials. Each pod role gets a key that murphy's S3 gateway
issued for it (:meth:`~murphy.runtimes.base.JobCredentials.issue`): one for the training Job's
hosts (their grants are the same: the job's input, output, tensors...), one for each rule Job (its
job's tensors to read, its own results to write). The key lives in that role's Secret only,
which the pods read through ``envFrom``; the gateway authorizes every request against the key's
grants and re-signs it with the service's credentials, which stay in murphy's process.

The key's id (not its secret) is annotated on the Secret (:data:`~murphy.runtimes.kubernetes_names.S3_ACCESS_KEY_ID`),
and on the handle: whoever removes the pods revokes it, a restarted murphy from its recorded
handles, the reconciler from what ``list_containers`` found. A launch that finds its Secret
already there (a launch tried again, a second host's launch) adopts it and its key: nothing new
is issued, so nothing is left unrevoked.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes.base import JobCredentials, Plan
from murphy.runtimes.kubernetes_client import KubeApi, KubernetesError, Obj

log = logging.getLogger(__name__)


def key_id_of(secret: Mapping[str, Any] | None) -> str | None:
    """The issued key's id annotated on a Secret (None on one murphy made without a key)."""
    value = (((secret or {}).get("metadata") or {}).get("annotations") or {}).get(kn.S3_ACCESS_KEY_ID)
    return str(value) if value else None


class PodKeys:
    """Issues, puts in Secrets, and revokes the pods' keys (module docstring). Without
    ``credentials`` (a runtime built by hand in tests) Secrets hold the region only."""

    def __init__(self, api: KubeApi, opts: ko.KubernetesOptions, credentials: JobCredentials | None) -> None:
        self.api = api
        self.opts = opts
        self.credentials = credentials

    def ensure(self, plan: Plan, anchor: Obj, ensure: Callable[[Obj], Obj]) -> str | None:
        """The Secret of ``plan``'s pods, owned by ``anchor``, created with a new key or adopted
        with its own (``ensure``: the runtime's create-or-adopt). Returns the key's id."""
        name = kn.pod_secret_name(self.opts.runtime_id, plan)
        existing = self.api.get("Secret", name)
        if existing is not None and not existing["metadata"].get("deletionTimestamp"):
            if self.credentials is None or key_id_of(existing) is not None:
                return key_id_of(existing)
            # Made by a murphy before per-job keys (the service's credentials): never adopted.
            log.warning("kubernetes: replacing Secret %s, which holds no key issued for its pods", name)
            self.api.delete("Secret", name, propagation="Background")
        uid = str(anchor["metadata"]["uid"])
        if self.credentials is None:
            return key_id_of(ensure(ko.owned_by(kn.with_spec_hash(ko.secret(plan, {}, self.opts)), anchor, uid)))
        creds = self.credentials.issue(plan, None)  # the endpoint is the pods' plain env (ko.store_env)
        try:
            obj = ko.secret(plan, creds.env, self.opts, access_key_id=creds.access_key_id)
            got = key_id_of(ensure(ko.owned_by(kn.with_spec_hash(obj), anchor, uid)))
        except BaseException:
            self.credentials.revoke(creds.access_key_id)
            raise
        if got != creds.access_key_id:  # another launch created it in between: its key is the pods'
            self.credentials.revoke(creds.access_key_id)
        return got

    def discard(self, plan: Plan) -> None:
        """After a launch that failed for good: the key it may have issued stops working and its
        Secret goes (pods it may have started then fail; the job has failed already)."""
        name = kn.pod_secret_name(self.opts.runtime_id, plan)
        with contextlib.suppress(KubernetesError):
            self.revoke({"secret": name})
            self.api.delete("Secret", name, propagation="Background")

    def revoke(self, d: Mapping[str, Any]) -> None:
        """Revoke the key of a handle's pods. A launch's handle records the key's id (the one its
        Secret names: :meth:`ensure` returns the Secret's own), so no request is made for it; a
        handle without one (:meth:`discard`'s, the reconciler's from ``list_containers``) gets it
        from its Secret's annotation, one GET."""
        if self.credentials is None:
            return
        key_id = d.get("s3_access_key_id")
        if not key_id and d.get("secret"):
            try:
                key_id = key_id_of(self.api.get("Secret", str(d["secret"])))
            except KubernetesError as e:  # nothing to revoke by name: the key expires by itself
                log.warning("kubernetes: cannot read Secret %s to revoke its key: %s", d["secret"], e)
        if key_id:
            self.credentials.revoke(str(key_id))

    def close(self) -> None:
        if self.credentials is not None:
            self.credentials.close()
