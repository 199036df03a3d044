"""The fake Kubernetes API server's pure parts: selectors, patches, quantities, the Job
controller's index compression, admission messages and the store's deletion semantics."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from murphy.runtimes.kubernetes_fake import jobs, patch, quantity, selectors
from murphy.runtimes.kubernetes_fake.errors import ApiStatusError
from murphy.runtimes.kubernetes_fake.kinds import BY_KEY
from murphy.runtimes.kubernetes_fake.store import Store


def obj(**labels: str) -> dict[str, object]:
    return {"metadata": {"name": "x", "labels": labels}, "status": {"phase": "Running"}}


@pytest.mark.parametrize(("selector", "labels", "want"), [
    ("a=b", {"a": "b"}, True), ("a==b", {"a": "c"}, False), ("a!=b", {}, True), ("a", {"a": ""}, True),
    ("!a", {"a": "1"}, False), ("a in (x, y),b", {"a": "y", "b": "1"}, True), ("a notin (x)", {"a": "x"}, False),
    ("a notin (x)", {}, True), ("murphy.io/role=training,app.kubernetes.io/managed-by=murphy",
                                {"murphy.io/role": "training", "app.kubernetes.io/managed-by": "murphy"}, True),
])
def test_label_selectors(selector: str, labels: dict[str, str], want: bool) -> None:
    assert selectors.label_selector(selector)(obj(**labels)) is want


def test_bad_selectors_are_400() -> None:
    with pytest.raises(ApiStatusError) as e:
        selectors.label_selector("a in x")
    assert e.value.code == 400
    with pytest.raises(ApiStatusError):
        selectors.field_selector("nonsense")


def test_field_selectors() -> None:
    event = {"metadata": {"name": "e"}, "involvedObject": {"name": "p", "uid": "u1"}, "type": "Warning"}
    assert selectors.field_selector("involvedObject.uid=u1,type!=Normal")(event)
    assert not selectors.field_selector("involvedObject.name=q")(event)
    assert selectors.field_selector("status.phase=Running")(obj())


def test_match_label_selector_expressions() -> None:
    sel = {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]},
                                                            {"key": "c", "operator": "DoesNotExist"}]}
    assert selectors.match_label_selector(sel, {"a": "1", "b": "x"})
    assert not selectors.match_label_selector(sel, {"a": "1", "b": "x", "c": ""})
    assert not selectors.match_label_selector(None, {"a": "1"})


def test_patches() -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]},
           "metadata": {"finalizers": ["f1"], "annotations": {"k": "v"}}}
    out = patch.apply_patch(patch.STRATEGIC, pod, {"spec": {"containers": [{"name": "b", "image": "i3"}]},
                                                   "metadata": {"finalizers": ["f2"], "annotations": {"k": None}}})
    assert out["spec"]["containers"] == [{"name": "a", "image": "i1"}, {"name": "b", "image": "i3"}]
    assert out["metadata"] == {"finalizers": ["f1", "f2"], "annotations": {}}
    out = patch.apply_patch(patch.STRATEGIC, pod, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["b"]
    out = patch.apply_patch(patch.MERGE, pod, {"spec": {"containers": [{"name": "c"}]}})
    assert out["spec"]["containers"] == [{"name": "c"}]  # a merge patch replaces lists
    out = patch.apply_patch(patch.JSON_PATCH, pod, [{"op": "add", "path": "/metadata/annotations/n", "value": "1"},
                                                    {"op": "remove", "path": "/spec/containers/0"}])
    assert out["metadata"]["annotations"] == {"k": "v", "n": "1"} and len(out["spec"]["containers"]) == 1
    with pytest.raises(ApiStatusError) as e:
        patch.apply_patch(patch.JSON_PATCH, pod, [{"op": "test", "path": "/metadata/annotations/k", "value": "w"}])
    assert e.value.code == 422
    with pytest.raises(ApiStatusError) as e:
        patch.apply_patch("text/plain", pod, {})
    assert e.value.code == 415


def test_quantities_and_requests() -> None:
    assert quantity.parse_quantity("3500m") == Fraction(7, 2)
    assert quantity.parse_quantity("13Gi") == 13 * 2**30
    assert quantity.parse_quantity("1e3") == 1000
    with pytest.raises(ValueError):
        quantity.parse_quantity("lots")
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
                                   {"resources": {"requests": {"cpu": "500m"}}}],
                    "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]}}
    assert quantity.pod_requests(pod) == {"cpu": 4, "nvidia.com/gpu": 1}


def test_completed_indexes() -> None:
    assert jobs.compress({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert jobs.compress(set()) == ""


def test_store_deletion_semantics() -> None:
    store = Store(("murphy-jobs",))
    cm, job, pod = BY_KEY["configmaps"], BY_KEY["jobs"], BY_KEY["pods"]
    anchor = store.create(cm, "murphy-jobs", {"metadata": {"name": "a"}})
    deleting = store.delete(cm, "murphy-jobs", "a", propagation="Foreground")
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"] and deleting["metadata"]["deletionTimestamp"]
    assert store.delete(cm, "murphy-jobs", "a", propagation="Foreground")["metadata"]["resourceVersion"] == \
        deleting["metadata"]["resourceVersion"]  # repeated: nothing new
    store.remove_finalizer("configmaps", "murphy-jobs", "a", "foregroundDeletion")
    assert store.find("configmaps", "murphy-jobs", "a") is None
    with pytest.raises(ApiStatusError) as e:
        store.create(job, "murphy-jobs", {"metadata": {"name": "j" * 64}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
    assert e.value.code == 422 and "must be no more than 63 characters" in e.value.message
    j = store.create(job, "murphy-jobs", {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
    assert j["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": j["metadata"]["uid"]}}
    assert (j["spec"]["backoffLimit"], j["spec"]["completionMode"]) == (6, "NonIndexed")
    assert store.delete(job, "murphy-jobs", "j")["metadata"]["finalizers"] == ["orphan"]  # batch/v1's default
    p = store.create(pod, "murphy-jobs", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert p["spec"]["serviceAccountName"] == "default" and p["spec"]["terminationGracePeriodSeconds"] == 30
    store.delete(pod, "murphy-jobs", "p")
    assert store.find("pods", "murphy-jobs", "p") is None  # never scheduled: no kubelet to wait for
    assert anchor["metadata"]["uid"] != j["metadata"]["uid"]


def test_watch_history_resumes_by_version_and_expires() -> None:
    store = Store(("ns",), history=20)
    cm = BY_KEY["configmaps"]
    first = int(store.create(cm, "ns", {"metadata": {"name": "c0"}})["metadata"]["resourceVersion"])
    for i in range(1, 5):
        store.create(cm, "ns", {"metadata": {"name": f"c{i}"}})
    assert [c.obj["metadata"]["name"] for c in store.changes_since(first, "configmaps")] == ["c1", "c2", "c3", "c4"]
    assert store.changes_since(first, "secrets") == []
    for i in range(5, 40):
        store.create(cm, "ns", {"metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiStatusError) as e:
        store.changes_since(first, "configmaps")
    assert e.value.code == 410 and e.value.reason == "Expired"
    recent = store.resource_version - 3
    assert [c.obj["metadata"]["name"] for c in store.changes_since(recent, "configmaps")] == ["c37", "c38", "c39"]


def test_indexed_pods_are_made_as_the_real_job_controller_makes_them(tmp_path: Path) -> None:
    from murphy.runtimes.kubernetes_fake import FakeCluster

    cluster = FakeCluster(str(tmp_path / "fake"))
    name = "j" * 63
    own = {"name": "JOB_COMPLETION_INDEX", "value": "mine"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
           "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "template": {"spec": {
               "restartPolicy": "Never", "hostname": "ignored",
               "initContainers": [{"name": "init", "image": "busybox", "env": [own]}],
               "containers": [{"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}]}}}}
    cluster.store.create(BY_KEY["jobs"], "default", job)
    cluster.jobs.sync_all()
    pods = sorted(cluster.store.iter_all("pods"), key=lambda p: p["metadata"]["annotations"][jobs.INDEX_KEY])
    assert len(pods) == 2
    for i, pod in enumerate(pods):
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["annotations"][jobs.INDEX_KEY] == meta["labels"][jobs.INDEX_KEY] == str(i)
        assert spec["hostname"] == f"{name}-{i}"  # the controller's, whatever the template says
        # The generated prefix is cut to 58 characters, the index kept.
        assert meta["generateName"] == name[:55] + f"-{i}-" and meta["name"].startswith(meta["generateName"])
        assert spec["initContainers"][0]["env"] == [own]  # defined already: left alone
        assert spec["containers"][0]["env"] == [
            {"name": "A", "value": "1"},
            {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                "apiVersion": "v1", "fieldPath": f"metadata.labels['{jobs.INDEX_KEY}']"}}}]
