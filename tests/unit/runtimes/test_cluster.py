"""How a multi-instance job's hosts find each other (murphy.runtimes.cluster, docker_spec's
cluster arguments, the layout's contract files): pure builders, no engine."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path

from murphy.container.env import OptMl, host_names, resource_config, sm_environment
from murphy.runtimes import docker_spec as spec
from murphy.runtimes.base import TrainingPlan
from murphy.runtimes.catalog import CatalogEntry
from murphy.runtimes.cluster import (
    HostNetwork,
    container_network,
    hosts_file,
    loopback_addresses,
    shared_master_port,
)
from murphy.runtimes.layout import write_training_layout
from murphy.storage import gateway

HOSTS = ("algo-1", "algo-2")


def plan(host: str = "algo-2", hosts: tuple[str, ...] = HOSTS) -> TrainingPlan:
    i = hosts.index(host) + 1
    return TrainingPlan(container_name="j-training" if i == 1 else f"j-training-{i}", job_name="j", image="img",
                        hyperparameters={"sagemaker_program": '"train.py"'}, environment={},
                        instance_type="ml.c5.2xlarge", instance_count=len(hosts), current_host=host, hosts=hosts,
                        first_host_container="j-training")


def test_host_names_and_resource_config_of_each_host() -> None:
    assert host_names(3) == ["algo-1", "algo-2", "algo-3"]
    rc = resource_config("ml.c5.2xlarge", "algo-2", HOSTS)
    assert rc == {
        "current_host": "algo-2", "current_instance_type": "ml.c5.2xlarge", "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2"],
        "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.c5.2xlarge",
                             "hosts": ["algo-1", "algo-2"]}],
        "network_interface_name": "eth0",
    }
    assert resource_config("ml.m5.xlarge")["hosts"] == ["algo-1"]  # one host: as before


def test_sm_environment_names_the_host_and_the_master() -> None:
    for host, master in (("algo-1", True), ("algo-2", False)):
        env = sm_environment(OptMl("/opt/ml"), {}, {}, resource_config("ml.m5.xlarge", host, HOSTS),
                             job_name="j", num_cpus=4, num_gpus=0)
        assert json.loads(env["SM_HOSTS"]) == ["algo-1", "algo-2"] and env["SM_CURRENT_HOST"] == host
        assert (env["SM_NUM_CPUS"], env["SM_NUM_GPUS"]) == ("4", "0")
        assert json.loads(env["SM_RESOURCE_CONFIG"])["current_host"] == host
        training_env = json.loads(env["SM_TRAINING_ENV"])
        assert training_env["is_master"] is master and training_env["master_hostname"] == "algo-1"


def test_loopback_addresses_and_the_hosts_file() -> None:
    addresses = loopback_addresses(HOSTS)
    assert addresses == {"algo-1": "127.0.0.1", "algo-2": "127.0.0.2"}
    text = hosts_file(addresses)
    assert "127.0.0.1\tlocalhost" in text and "127.0.0.2\talgo-2\n" in text
    net = HostNetwork(addresses, 4242)
    assert net.master_addr(HOSTS) == "127.0.0.1"  # names do not resolve: an address
    assert HostNetwork(addresses, 7777, names_resolve=True).master_addr(HOSTS) == "algo-1"


def test_the_master_port_is_one_per_job_whoever_asks_first(tmp_path: Path) -> None:
    first = str(tmp_path / "j-training")
    ports: list[int] = []
    threads = [threading.Thread(target=lambda: ports.append(shared_master_port(first))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ports)) == 1 and 1024 < ports[0] < 65536
    assert shared_master_port(first) == ports[0]
    shared_master_port(str(tmp_path / "k-training"))  # another job: a file of its own
    assert json.loads((tmp_path / "j-training" / "cluster.json").read_text()) == {"master_port": ports[0]}
    assert (tmp_path / "k-training" / "cluster.json").exists()


def test_docker_hosts_share_algo_1s_namespace_with_a_hosts_file(tmp_path: Path) -> None:
    one, two = plan("algo-1"), plan("algo-2")
    assert spec.cluster_kwargs(one, "abc", "none", "/c/j-training/hosts") == {
        "volumes": {"/c/j-training/hosts": {"bind": "/etc/hosts", "mode": "ro"}}, "hostname": "algo-1"}
    kw = spec.cluster_kwargs(two, "abc", "none", "/c/j-training-2/hosts")
    assert kw["network_mode"] == "container:murphy-abc-j-training" and "hostname" not in kw
    assert spec.cluster_kwargs(two, "abc", "host", "/h") == {"volumes": {"/h": {"bind": "/etc/hosts", "mode": "ro"}}}
    single = dataclasses.replace(one, hosts=("algo-1",))
    assert spec.cluster_kwargs(single, "abc", "none", "/h") == {}
    full = spec.create_kwargs(two, image="i", name="murphy-abc-j-training-2", env={}, container_dir="/c/j-training-2",
                              store=spec.StoreAccess(buckets_dir="/b"), host=spec.HostLimits(2, 8 << 30),
                              options=spec.DockerOptions(), rid="abc")
    assert full["network_mode"] == "container:murphy-abc-j-training"
    assert full["volumes"]["/c/j-training-2/hosts"] == {"bind": "/etc/hosts", "mode": "ro"}
    assert full["read_only"] is True and full["cap_drop"] == ["ALL"]  # isolation unchanged
    net = container_network(HOSTS, str(tmp_path), str(tmp_path / "first"), "none")
    assert net is not None and net.master_port == 7777 and net.master_addr(HOSTS) == "algo-1"
    assert "127.0.0.2\talgo-2" in (tmp_path / "hosts").read_text()
    shared = container_network(HOSTS, str(tmp_path), str(tmp_path / "first"), "host")  # the host's network
    assert shared is not None and shared.master_port == shared_master_port(str(tmp_path / "first"))
    assert container_network(("algo-1",), str(tmp_path), str(tmp_path / "first"), "none") is None


def test_hosts_sharing_a_loopback_serve_the_s3_gateway_on_their_own_ports() -> None:
    env = {gateway.PORT_ENV: str(gateway.DEFAULT_PORT), "MURPHY_S3_ENDPOINT_URL": spec.LOOPBACK_ENDPOINT}
    assert spec.host_gateway_env(env, 1) == {}
    two = spec.host_gateway_env(env, 2)
    assert two[gateway.PORT_ENV] == str(gateway.DEFAULT_PORT + 1)
    assert two["MURPHY_S3_ENDPOINT_URL"] == two["AWS_ENDPOINT_URL_S3"] == f"http://127.0.0.1:{gateway.DEFAULT_PORT + 1}"
    assert spec.host_gateway_env({"MURPHY_S3_LOCAL_ROOT": "/b"}, 2) == {}


def test_the_process_layout_of_host_2(tmp_path: Path) -> None:
    entry = CatalogEntry("img", "script-mode", ())
    net = HostNetwork(loopback_addresses(HOSTS), 40123)
    opt_ml, env = write_training_layout(str(tmp_path), plan("algo-2"), entry, "/usr/bin/python3", {}, network=net)
    rc = json.loads(Path(opt_ml.config_file("resourceconfig.json")).read_text())
    assert rc["current_host"] == "algo-2" and rc["hosts"] == list(HOSTS)
    murphy = json.loads(Path(opt_ml.config_file("murphy.json")).read_text())
    assert murphy["cluster"] == {"hosts": list(HOSTS), "current_host": "algo-2", "master_addr": "127.0.0.1",
                                 "master_port": 40123, "addresses": {"algo-1": "127.0.0.1", "algo-2": "127.0.0.2"}}
    assert murphy["upload_model"] is False and murphy["end_marker"] is False
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "40123")
    assert env["SM_CURRENT_HOST"] == "algo-2"
    _, env1 = write_training_layout(str(tmp_path / "one"), dataclasses.replace(plan("algo-1"), hosts=("algo-1",)),
                                    entry, "/usr/bin/python3", {})
    murphy1 = json.loads((tmp_path / "one" / "opt" / "ml" / "input" / "config" / "murphy.json").read_text())
    assert murphy1["cluster"] is None and murphy1["end_marker"] is True and "MASTER_ADDR" not in env1
    assert os.path.isdir(opt_ml.tensors_dir)
