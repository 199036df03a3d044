"""The Kubernetes API through ``lightkube`` (the one module that imports it; the
import-linter contract "Framework imports live only in their adapter modules" names it).

:class:`LightkubeApi` implements :class:`~murphy.runtimes.kubernetes_client.KubeApi` on plain
JSON objects: the runtime builds manifests as dicts (:mod:`murphy.runtimes.kubernetes_objects`)
and reads status as dicts (:mod:`murphy.runtimes.kubernetes_status`), so the typed models stay
here. Every exception the library, httpx2 or the kubeconfig loader raises goes through
:func:`map_error`, the one place they become murphy's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

import httpx2
from lightkube import ApiError, Client, ConfigError, KubeConfig, SingleConfig, codecs
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import LoadResourceError
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Event, Pod, PodLog, Secret, Service
from lightkube.types import CascadeType, PatchType

from murphy.runtimes.kubernetes_client import (
    KubernetesConfigError,
    KubernetesConflict,
    KubernetesError,
    KubernetesNotFound,
    Obj,
)

_RESOURCES: dict[str, Any] = {"ConfigMap": ConfigMap, "Secret": Secret, "Service": Service, "Job": Job, "Pod": Pod,
                              "Event": Event}
_CASCADE = {"Foreground": CascadeType.FOREGROUND, "Background": CascadeType.BACKGROUND, "Orphan": CascadeType.ORPHAN}


def map_error(err: BaseException, what: str) -> KubernetesError:
    """``err`` (raised while doing ``what``) as murphy's exception: the API server's own status
    and message for an ``ApiError``, a hint for the usual causes (RBAC, quota, validation)."""
    if isinstance(err, KubernetesError):
        return err
    if isinstance(err, ApiError):
        status = err.status.code or (err.response.status_code if err.response is not None else None)
        reason = err.status.reason or ""
        message = err.status.message or str(err)
        text = f"Kubernetes API: {what}: {message} ({status} {reason})".rstrip()
        if status == 409:
            return KubernetesConflict(text, status=status, reason=reason)
        if status == 404:
            return KubernetesNotFound(text, status=status, reason=reason)
        if status in (401, 403):
            return KubernetesError(f"{text}; murphy's ServiceAccount lacks a permission of the murphy-runtime Role "
                                   "(infra/kubernetes/base), or its credentials expired", status=status, reason=reason)
        retry = status is not None and (status == 429 or status >= 500)
        return KubernetesError(text, status=status, reason=reason, retryable=retry)
    if isinstance(err, ConfigError):
        return KubernetesConfigError(f"Kubernetes configuration: {err} (set MURPHY_KUBERNETES_KUBECONFIG, "
                                     "or run murphy in a pod with a ServiceAccount)")
    if isinstance(err, httpx2.TimeoutException):
        return KubernetesError(f"Kubernetes API: {what}: timed out ({err})", retryable=True)
    if isinstance(err, httpx2.HTTPStatusError):  # a non-JSON error body (a proxy, an ingress)
        code = err.response.status_code
        return KubernetesError(f"Kubernetes API: {what}: HTTP {code}", status=code, retryable=code >= 500 or code == 429)
    if isinstance(err, httpx2.HTTPError):
        return KubernetesError(f"Kubernetes API: {what}: cannot reach the API server ({type(err).__name__}: {err})",
                               retryable=True)
    if isinstance(err, (LoadResourceError, ValueError, TypeError, KeyError)):
        return KubernetesError(f"Kubernetes API: {what}: unusable object or answer ({err})")
    if isinstance(err, OSError):
        return KubernetesError(f"Kubernetes API: {what}: {err}", retryable=True)
    raise err


def _raise(err: BaseException, what: str) -> NoReturn:
    raise map_error(err, what) from err


def load_config(kubeconfig: str | None = None, context: str | None = None,
                server: str | None = None) -> KubeConfig | SingleConfig:
    """``server`` (a bare URL without authentication: ``kubectl proxy``, the fake API server of
    the tests), else ``kubeconfig`` (a file; ``context`` selects one of its contexts), else the
    environment: the in-cluster ServiceAccount, ``KUBECONFIG``, ``~/.kube/config``."""
    try:
        if server:
            return KubeConfig.from_one(cluster=Cluster(server=server), user=User())
        conf = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        if context:
            single = conf.get(context_name=context)  # refuses an unknown context now, not at the first request
            assert single is not None
            return single
        return conf
    except (ConfigError, OSError, ValueError, KeyError) as e:
        _raise(e if isinstance(e, ConfigError) else ConfigError(str(e)), "loading the configuration")


class LightkubeApi:
    """:class:`~murphy.runtimes.kubernetes_client.KubeApi` over a ``lightkube.Client``."""

    def __init__(self, namespace: str, config: KubeConfig | SingleConfig | None = None, *, timeout_s: float = 10.0,
                 transport: httpx2.BaseTransport | None = None) -> None:
        self.namespace = namespace
        self.requests = 0
        # httpx2 logs every request at INFO: a line per poll would bury murphy's own log.
        logging.getLogger("httpx2").setLevel(max(logging.WARNING, logging.getLogger("httpx2").level))
        try:
            self._client = Client(config=config, namespace=namespace, timeout=httpx2.Timeout(timeout_s),
                                  field_manager="murphy", trust_env=config is None, transport=transport)
        except (ConfigError, OSError, ValueError) as e:
            _raise(e if isinstance(e, ConfigError) else ConfigError(str(e)), "connecting")

    def _res(self, kind: str) -> Any:
        try:
            return _RESOURCES[kind]
        except KeyError:
            raise KubernetesError(f"murphy does not manage {kind} objects") from None

    def create(self, obj: Obj) -> Obj:
        self.requests += 1
        what = f"create {obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        try:
            typed: Any = codecs.from_dict(obj)
            created: Any = self._client.create(typed, namespace=self.namespace)
            return dict(created.to_dict())
        except Exception as e:
            _raise(e, what)

    def get(self, kind: str, name: str) -> Obj | None:
        self.requests += 1
        try:
            return dict(self._client.get(self._res(kind), name, namespace=self.namespace).to_dict())
        except ApiError as e:
            if e.status.code == 404:
                return None
            _raise(e, f"get {kind} {name}")
        except Exception as e:
            _raise(e, f"get {kind} {name}")

    def list(self, kind: str, *, labels: Mapping[str, str] | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        self.requests += 1
        try:
            found = self._client.list(self._res(kind), namespace=self.namespace, labels=dict(labels or {}) or None,
                                      fields=dict(fields or {}) or None)
            return [dict(o.to_dict()) for o in found]
        except Exception as e:
            _raise(e, f"list {kind}")

    def patch_annotations(self, kind: str, name: str, annotations: Mapping[str, str]) -> Obj | None:
        self.requests += 1
        try:
            patched = self._client.patch(self._res(kind), name, {"metadata": {"annotations": dict(annotations)}},
                                         namespace=self.namespace, patch_type=PatchType.MERGE)
            return dict(patched.to_dict())
        except ApiError as e:
            if e.status.code == 404:
                return None
            _raise(e, f"annotate {kind} {name}")
        except Exception as e:
            _raise(e, f"annotate {kind} {name}")

    def delete(self, kind: str, name: str, *, propagation: str = "Foreground", grace_s: int | None = None) -> bool:
        self.requests += 1
        try:
            self._client.delete(self._res(kind), name, namespace=self.namespace, grace_period=grace_s,
                                cascade=_CASCADE[propagation])
            return True
        except ApiError as e:
            if e.status.code == 404:
                return False
            _raise(e, f"delete {kind} {name}")
        except Exception as e:
            _raise(e, f"delete {kind} {name}")

    def pod_log(self, pod: str, container: str, *, since_time: str | None = None,
                follow: bool = False) -> Iterator[str]:
        """``Client.log`` has no ``sinceTime`` (it is missing from the API's OpenAPI document,
        kubernetes/kubernetes#108498), so this builds the same request with it, through the
        client's own request path (authentication, TLS, error decoding)."""
        self.requests += 1
        what = f"read the log of {pod}/{container}"
        params: dict[str, Any] = {"container": container, "timestamps": True, "follow": follow}
        if since_time:
            params["sinceTime"] = since_time
        inner: Any = self._client._client
        try:
            br = inner.prepare_request("get", PodLog, name=pod, namespace=self.namespace, params=params)
            if follow:  # a followed log may be silent for a long time: no read timeout
                br.timeout = httpx2.Timeout(self._client._timeout)
                br.timeout.read = None
            resp = inner.send(inner.build_adapter_request(br), stream=follow)
            if resp.is_error:
                resp.read()
            inner.raise_for_status(resp)
        except Exception as e:
            _raise(e, what)
        return self._lines(resp, what)

    def _lines(self, resp: httpx2.Response, what: str) -> Iterator[str]:
        try:
            yield from resp.iter_lines()
        except Exception as e:
            _raise(e, what)
        finally:
            with contextlib.suppress(Exception):
                resp.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
