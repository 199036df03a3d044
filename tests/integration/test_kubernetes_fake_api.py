"""The fake Kubernetes API server's API semantics, through the real lightkube client over HTTP:
errors as ``Status`` bodies (lightkube's ApiError), selectors, patches, resourceVersion
conflicts, watches (resume, 410 Gone), discovery, and garbage collection by ownerReferences."""

# ruff: noqa: F811

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.codecs import from_dict
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Event, Pod, Secret
from lightkube.resources.events_v1 import Event as EventV1
from lightkube.types import CascadeType, PatchType

from k8s_fake import fake_k8s, lightkube_client  # noqa: F401 (the fixture; tests name it as a parameter)
from murphy.runtimes.kubernetes_fake import FakeCluster


def client(cluster: FakeCluster) -> Client:
    return lightkube_client(cluster)  # type: ignore[no-any-return]


def get_json(cluster: FakeCluster, path: str) -> Any:
    with urllib.request.urlopen(cluster.url + path, timeout=10) as resp:
        return json.loads(resp.read())


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, labels=labels), data=data)


def test_errors_are_status_bodies_lightkube_maps(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    with pytest.raises(ApiError) as e:
        c.get(ConfigMap, "missing")
    assert (e.value.status.code, e.value.status.reason) == (404, "NotFound")
    assert e.value.status.message == 'configmaps "missing" not found'
    c.create(cm("one", a="1"))
    with pytest.raises(ApiError) as e:
        c.create(cm("one", a="1"))
    assert (e.value.status.code, e.value.status.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as e:
        c.create(cm("Not_A_Name"))
    assert (e.value.status.code, e.value.status.reason) == (422, "Invalid")
    assert "metadata.name" in e.value.status.message
    stale = c.get(ConfigMap, "one")
    c.patch(ConfigMap, "one", {"data": {"a": "2"}}, patch_type=PatchType.MERGE)
    stale.data = {"a": "3"}
    with pytest.raises(ApiError) as e:
        c.replace(stale)
    assert (e.value.status.code, e.value.status.reason) == (409, "Conflict")
    with pytest.raises(ApiError) as e:
        c.create(cm("elsewhere"), namespace="no-such-namespace")
    assert e.value.status.code == 404 and e.value.status.message == 'namespaces "no-such-namespace" not found'


def test_immutable_configmap_and_secret_string_data(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(ConfigMap(metadata=ObjectMeta(name="frozen"), data={"k": "v"}, immutable=True))
    with pytest.raises(ApiError) as e:
        c.patch(ConfigMap, "frozen", {"data": {"k": "w"}}, patch_type=PatchType.MERGE)
    assert e.value.status.code == 422 and "immutable" in e.value.status.message
    c.create(Secret(metadata=ObjectMeta(name="s"), stringData={"KEY": "secret-value"}))
    got = c.get(Secret, "s")
    assert got.data == {"KEY": "c2VjcmV0LXZhbHVl"} and got.stringData is None and got.type == "Opaque"


def test_label_and_field_selectors(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(cm("a", {"app": "murphy", "role": "training"}))
    c.create(cm("b", {"app": "murphy", "role": "rule"}))
    c.create(cm("c", {"app": "other"}))

    def names(**kw: Any) -> list[str]:
        return sorted(o.metadata.name for o in c.list(ConfigMap, **kw))

    assert names(labels={"app": "murphy"}) == ["a", "b"]
    assert names(labels={"role": ("training", "rule")}) == ["a", "b"]
    raw = get_json(fake_k8s, "/api/v1/namespaces/default/configmaps?labelSelector=app%3Dmurphy,role%20notin%20(rule)")
    assert [i["metadata"]["name"] for i in raw["items"]] == ["a"]
    assert raw["kind"] == "ConfigMapList" and int(raw["metadata"]["resourceVersion"]) > 0
    raw = get_json(fake_k8s, "/api/v1/namespaces/default/configmaps?labelSelector=!role")
    assert [i["metadata"]["name"] for i in raw["items"]] == ["c"]
    assert names(fields={"metadata.name": "b"}) == ["b"]
    page = get_json(fake_k8s, "/api/v1/namespaces/default/configmaps?limit=2")
    assert len(page["items"]) == 2 and page["metadata"]["continue"]
    rest = get_json(fake_k8s, f"/api/v1/namespaces/default/configmaps?limit=2&continue={page['metadata']['continue']}")
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c"]


def test_merge_and_strategic_merge_patches(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(ConfigMap(metadata=ObjectMeta(name="p", annotations={"keep": "1", "drop": "2"}), data={"x": "1"}))
    out = c.patch(ConfigMap, "p", {"metadata": {"annotations": {"murphy.io/stop-reason": "user", "drop": None}}},
                  patch_type=PatchType.MERGE)
    assert out.metadata.annotations == {"keep": "1", "murphy.io/stop-reason": "user"}
    out = c.patch(ConfigMap, "p", {"metadata": {"labels": {"l": "v"}}}, patch_type=PatchType.STRATEGIC)
    assert out.metadata.labels == {"l": "v"} and out.metadata.annotations["keep"] == "1"
    out = c.patch(ConfigMap, "p", [{"op": "replace", "path": "/data/x", "value": "2"}], patch_type=PatchType.JSON)
    assert out.data == {"x": "2"}


def test_watch_resumes_from_a_resource_version_and_410_after_compaction(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    first = c.create(cm("w1", {"w": "yes"}))
    rv = first.metadata.resourceVersion
    c.patch(ConfigMap, "w1", {"data": {"a": "b"}}, patch_type=PatchType.MERGE)
    c.create(cm("w2", {"w": "no"}))
    c.delete(ConfigMap, "w1")
    seen = []
    for kind, obj in c.watch(ConfigMap, labels={"w": "yes"}, resource_version=rv):
        seen.append((kind, obj.metadata.name))
        if kind == "DELETED":
            break
    assert seen == [("MODIFIED", "w1"), ("DELETED", "w1")]
    fake_k8s.store.compact()
    lines = urllib.request.urlopen(f"{fake_k8s.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}",
                                   timeout=10).read().decode().splitlines()
    event = json.loads(lines[0])
    assert event["type"] == "ERROR" and event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_watch_streams_changes_as_they_happen(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    got: list[tuple[str, str]] = []

    def watch() -> None:
        for kind, obj in c.watch(ConfigMap, labels={"live": "1"}):
            got.append((kind, obj.metadata.name))
            if kind == "DELETED":
                return

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    fake_k8s.wait_for(lambda: fake_k8s.requests.snapshot().get("GET configmaps"), what="the watch request")
    c.create(cm("live", {"live": "1"}))
    c.patch(ConfigMap, "live", {"metadata": {"labels": {"live": "0"}}}, patch_type=PatchType.MERGE)
    t.join(timeout=10)
    # Leaving the selector is a DELETED for this watch, as on a real server.
    assert got == [("ADDED", "live"), ("DELETED", "live")]


def test_discovery_version_and_health(fake_k8s: FakeCluster) -> None:
    assert get_json(fake_k8s, "/version")["major"] == "1"
    assert urllib.request.urlopen(fake_k8s.url + "/healthz", timeout=5).read() == b"ok"
    core = {r["name"] for r in get_json(fake_k8s, "/api/v1")["resources"]}
    assert {"pods", "pods/log", "pods/status", "configmaps", "secrets", "services", "events"} <= core
    groups = {g["name"] for g in get_json(fake_k8s, "/apis")["groups"]}
    assert {"batch", "events.k8s.io"} <= groups
    assert {r["name"] for r in get_json(fake_k8s, "/apis/batch/v1")["resources"]} >= {"jobs", "jobs/status"}


def test_owner_references_cascade_foreground_background_orphan(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)

    def owned(name: str, owner: ConfigMap, block: bool = True) -> None:
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
               "blockOwnerDeletion": block}
        c.create(from_dict({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "ownerReferences": [ref]},
                            "stringData": {"k": "v"}}))

    for policy, expect_gone in ((CascadeType.FOREGROUND, True), (CascadeType.BACKGROUND, True), (CascadeType.ORPHAN, False)):
        anchor = c.create(cm(f"anchor-{policy.value.lower()}"))
        owned(f"dep-{policy.value.lower()}", anchor)
        c.delete(ConfigMap, anchor.metadata.name, cascade=policy)
        fake_k8s.wait_for(lambda a=anchor: not fake_k8s.store.find("configmaps", "default", a.metadata.name),
                          what=f"{policy.value} deletion of the anchor")
        if expect_gone:
            fake_k8s.wait_for(lambda p=policy: not fake_k8s.store.find("secrets", "default", f"dep-{p.value.lower()}"),
                              what=f"{policy.value} deletion of the dependent")
        else:
            dep = fake_k8s.wait_for(lambda: (d := c.get(Secret, "dep-orphan")) and not d.metadata.ownerReferences and d,
                                    what="the orphaned dependent")
            assert dep.metadata.deletionTimestamp is None


def test_events_in_both_api_versions(fake_k8s: FakeCluster) -> None:
    c = client(fake_k8s)
    c.create(from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely"},
                        "spec": {"restartPolicy": "Never", "nodeSelector": {"pool": "gpu"},
                                 "containers": [{"name": "c", "image": "python:3.11-slim", "command": ["true"]}]}}))
    events = fake_k8s.wait_for(lambda: list(c.list(Event, fields={"involvedObject.name": "lonely"})), what="an event")
    assert events[0].reason == "FailedScheduling" and "didn't match Pod's node affinity/selector" in events[0].message
    # The scheduler writes events.k8s.io/v1 events: no legacy timestamps in the core/v1 view.
    assert events[0].lastTimestamp is None and events[0].eventTime is not None and events[0].action == "Scheduling"
    v1 = list(c.list(EventV1, fields={"regarding.name": "lonely"}))
    assert v1[0].regarding.name == "lonely" and v1[0].note == events[0].message
    assert v1[0].reportingController == "default-scheduler"
    pod = c.get(Pod, "lonely")
    cond = next(x for x in pod.status.conditions if x.type == "PodScheduled")
    assert (cond.status, cond.reason) == ("False", "Unschedulable") and pod.status.phase == "Pending"


def test_injected_errors_and_latency(fake_k8s: FakeCluster) -> None:
    import time

    c = client(fake_k8s)
    fake_k8s.errors.add(code=429, method="POST", path_contains="/configmaps")
    with pytest.raises(ApiError) as e:
        c.create(cm("later"))
    assert (e.value.status.code, e.value.status.reason) == (429, "TooManyRequests")
    c.create(cm("later"))  # only the next one failed
    req = urllib.request.Request(f"{fake_k8s.url}/fake/v1/errors", method="POST",
                                 data=json.dumps({"code": 0, "delay_s": 0.5, "method": "GET"}).encode())
    urllib.request.urlopen(req, timeout=5).close()
    started = time.monotonic()
    assert c.get(ConfigMap, "later").metadata.name == "later"
    assert time.monotonic() - started >= 0.5
    fake_k8s.errors.add(code=500, times=2)
    for _ in range(2):
        with pytest.raises(ApiError) as e:
            c.get(ConfigMap, "later")
        assert e.value.status.code == 500
    assert c.get(ConfigMap, "later").metadata.name == "later"
