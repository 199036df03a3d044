"""Issue 18 §3 on the Kubernetes runtime (murphy.runtimes.kubernetes_keys): each pod role's Secret
holds only the key murphy's S3 gateway issued for it, never the service's; pods reach S3 at the
gateway; the key is revoked on remove, also by a restarted murphy and from what list_containers
finds; a launch tried again issues nothing new; a launch that fails for good leaves no key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_kubernetes_runtime import (
    OPTS,
    SERVICE_KEY,
    SERVICE_SECRET,
    Clock,
    add_pod,
    gateway,
    keys,
    rule,
    runtime,
    training,
)

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes import kubernetes_names as kn
from murphy.runtimes import kubernetes_objects as ko
from murphy.runtimes.base import SERVICE_CREDENTIAL_VARS, ScopedCredentials, scoped_environment
from murphy.runtimes.kubernetes import KubernetesRuntime
from murphy.runtimes.kubernetes_client import FakeKubeApi, KubernetesError


def secret_data(api: FakeKubeApi, name: str) -> dict[str, str]:
    return dict(api.objects[("Secret", name)]["data"])


def pod_specs(api: FakeKubeApi) -> list[dict[str, Any]]:
    return [o["spec"]["template"]["spec"] for (k, _), o in api.objects.items() if k == "Job"]


def test_each_pod_role_s_secret_holds_only_its_own_issued_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The service's own credentials are in murphy's environment, as in a deployment.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SERVICE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SERVICE_SECRET)
    api = FakeKubeApi()
    rt = runtime(tmp_path, api, Clock())
    ht, hr0, hr1 = rt.launch(training()), rt.launch(rule(0)), rt.launch(rule(1))
    train = secret_data(api, kn.secret_name("rid", training()))
    rules = [secret_data(api, kn.rule_secret_name("rid", rule(i))) for i in (0, 1)]
    assert set(train) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"}
    ids = [train["AWS_ACCESS_KEY_ID"], *(r["AWS_ACCESS_KEY_ID"] for r in rules)]
    assert all(i.startswith("ASIA") for i in ids) and len(set(ids)) == 3  # a key per pod role
    assert keys(tmp_path) == {ids[0]: "job-1-training", ids[1]: "job-1-rule-0", ids[2]: "job-1-rule-1"}
    assert [h.data["s3_access_key_id"] for h in (ht, hr0, hr1)] == ids
    for name, key_id in zip([kn.secret_name("rid", training()), *(kn.rule_secret_name("rid", rule(i)) for i in (0, 1))],
                            ids, strict=True):
        assert api.objects[("Secret", name)]["metadata"]["annotations"][kn.S3_ACCESS_KEY_ID] == key_id
    everything = json.dumps(list(api.objects.values()))
    assert SERVICE_KEY not in everything and SERVICE_SECRET not in everything
    # Each pod reads its own Secret, and reaches S3 only at the gateway.
    by_secret = {ko.secret_of(o): o["metadata"]["name"] for (k, _), o in api.objects.items() if k == "Job"}
    assert set(by_secret) == {kn.secret_name("rid", training()), *(kn.rule_secret_name("rid", rule(i)) for i in (0, 1))}
    for pod in pod_specs(api):
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            env = {e["name"]: e["value"] for e in c.get("env", [])}
            leaked = (set(SERVICE_CREDENTIAL_VARS) & env.keys()) - {"AWS_ENDPOINT_URL_S3", "MURPHY_S3_ENDPOINT_URL"}
            assert not leaked, leaked
            if c["name"] != "murphy-init":
                assert env["AWS_ENDPOINT_URL_S3"] == env["MURPHY_S3_ENDPOINT_URL"] == OPTS.s3_endpoint_url


def test_a_job_s_environment_cannot_name_another_identity_or_endpoint(tmp_path: Path) -> None:
    api = FakeKubeApi()
    plan = training()
    sneaky = {"AWS_ACCESS_KEY_ID": "AKIAOTHER", "AWS_PROFILE": "admin", "AWS_ENDPOINT_URL_S3": "http://s3-direct:8333",
              "MY_VAR": "kept"}
    plan = type(plan)(**{**plan.__dict__, "environment": sneaky})
    runtime(tmp_path, api, Clock()).launch(plan)
    env = {e["name"]: e["value"] for e in pod_specs(api)[0]["containers"][0]["env"]}
    assert env["MY_VAR"] == "kept" and env["AWS_ENDPOINT_URL_S3"] == OPTS.s3_endpoint_url
    assert "AWS_ACCESS_KEY_ID" not in env and "AWS_PROFILE" not in env


def test_a_launch_tried_again_or_by_a_restarted_murphy_issues_nothing_new(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    h = runtime(tmp_path, api, clock).launch(training())
    runtime(tmp_path, api, clock).launch(rule(0))
    before = keys(tmp_path)
    assert runtime(tmp_path, api, clock).launch(training()) == h
    runtime(tmp_path, api, clock).launch(rule(0))
    assert keys(tmp_path) == before


def test_remove_revokes_the_key_and_a_rule_s_secret_goes(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    ht, hr = rt.launch(training()), rt.launch(rule(0))
    rt.remove(hr)
    assert set(keys(tmp_path).values()) == {"job-1-training"}
    assert ("Secret", kn.rule_secret_name("rid", rule(0))) not in api.objects
    assert ("Secret", kn.secret_name("rid", training())) in api.objects
    rt.remove(ht)
    assert keys(tmp_path) == {} and not any(k == "Secret" for k, _ in api.objects)
    rt.remove(ht)  # idempotent


def test_remove_revokes_the_recorded_key_without_reading_the_secret(tmp_path: Path) -> None:
    # The handle records the key's id: remove revokes it without a GET of the Secret; a handle
    # without one (the reconciler's) reads it from the Secret, once.
    api, clock = FakeKubeApi(), Clock()
    rt = runtime(tmp_path, api, clock)
    ht, hr = rt.launch(training()), rt.launch(rule(0))
    api.calls.clear()
    rt.remove(hr)
    assert set(keys(tmp_path).values()) == {"job-1-training"}
    assert not [c for c in api.calls if c[:2] == ("get", "Secret")], api.calls
    found = {f.container_name: f.handle for f in rt.list_containers("job-1")}
    api.calls.clear()
    rt.remove(found["job-1-training"])
    assert keys(tmp_path) == {}
    assert [c[:3] for c in api.calls if c[:2] == ("get", "Secret")] == [("get", "Secret", ht.data["secret"])]


def test_a_restarted_murphy_revokes_from_the_handle_or_from_what_it_finds(tmp_path: Path) -> None:
    api, clock = FakeKubeApi(), Clock()
    first = runtime(tmp_path, api, clock)
    ht, hr = first.launch(training()), first.launch(rule(0))
    add_pod(api, ht.data["name"])
    # A restarted murphy (a new runtime, a new gateway, the same job store): the recorded handle.
    runtime(tmp_path, api, clock).remove(hr)
    assert set(keys(tmp_path).values()) == {"job-1-training"}
    # The reconciler's way: the handle list_containers builds from the Job carries no key id.
    found = {f.container_name: f.handle for f in runtime(tmp_path, api, clock).list_containers("job-1")}
    assert "s3_access_key_id" not in found["job-1-training"].data
    runtime(tmp_path, api, clock).remove(found["job-1-training"])
    assert keys(tmp_path) == {}


def test_a_launch_that_fails_for_good_leaves_no_key(tmp_path: Path) -> None:
    api = FakeKubeApi()
    real_create = api.create

    def no_jobs(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Job":
            raise KubernetesError("Kubernetes API: create Job: forbidden (403 Forbidden)", status=403)
        return real_create(obj)

    api.create = no_jobs  # type: ignore[method-assign]
    rt = runtime(tmp_path, api, Clock())
    with pytest.raises(RuntimeBackendError, match="403"):
        rt.launch(training())
    assert keys(tmp_path) == {} and ("Secret", kn.secret_name("rid", training())) not in api.objects
    with pytest.raises(RuntimeBackendError, match="403"):
        rt.launch(rule(0))
    assert keys(tmp_path) == {}


def test_without_a_gateway_the_secret_holds_no_credentials(tmp_path: Path) -> None:
    api = FakeKubeApi()
    h = KubernetesRuntime(tmp_path / "c", api, OPTS).launch(training())
    assert secret_data(api, kn.secret_name("rid", training())) == {"AWS_REGION": "us-east-1"}
    assert "s3_access_key_id" not in h.data


def test_the_gateway_sees_the_pods_keys_and_refuses_revoked_ones(tmp_path: Path) -> None:
    """The key in the Secret is one the gateway honours, and only until remove."""
    api = FakeKubeApi()
    rt = runtime(tmp_path, api, Clock())
    h = rt.launch(training())
    key_id = secret_data(api, kn.secret_name("rid", training()))["AWS_ACCESS_KEY_ID"]
    gw = gateway(tmp_path)
    assert gw.keys.resolve(key_id) is not None
    rt.remove(h)
    assert gw.keys.resolve(key_id) is None


def test_a_secret_left_by_a_murphy_before_per_job_keys_is_replaced_not_adopted(tmp_path: Path) -> None:
    api = FakeKubeApi()
    KubernetesRuntime(tmp_path / "old", api, OPTS).launch(training())  # its Secret: no issued key
    name = kn.secret_name("rid", training())
    api.objects[("Secret", name)]["data"].update(AWS_ACCESS_KEY_ID=SERVICE_KEY, AWS_SECRET_ACCESS_KEY=SERVICE_SECRET)
    h = runtime(tmp_path, api, Clock()).launch(training())
    data = secret_data(api, name)
    assert data["AWS_ACCESS_KEY_ID"] == h.data["s3_access_key_id"] and data["AWS_ACCESS_KEY_ID"].startswith("ASIA")
    assert SERVICE_SECRET not in data.values()


def test_pods_drop_the_service_identity_as_every_runtime_does() -> None:
    # One rule (base.with_identity): every identity variable goes, the rest stays, the
    # container's own identity comes last (the gateway's endpoint here, issued keys elsewhere).
    env = {**dict.fromkeys(SERVICE_CREDENTIAL_VARS, "the-service's"), "AWS_REGION": "us-west-2", "SM_HOSTS": '["algo-1"]'}
    kept = {"AWS_REGION": "us-west-2", "SM_HOSTS": '["algo-1"]'}
    assert ko.pod_env(env, OPTS) == {**kept, **ko.store_env(OPTS)}
    issued = {"AWS_ACCESS_KEY_ID": "ASIA1", "MURPHY_S3_ENDPOINT_URL": "http://gw"}
    assert scoped_environment(dict(env), ScopedCredentials("ASIA1", issued)) == {**kept, **issued}
