"""The toolkit's torchrun command for ``torch_distributed`` (murphy.container.distributed), as
SageMaker's toolkit builds it."""

from __future__ import annotations

import pytest

from murphy.container.distributed import (
    TORCH_DISTRIBUTED_HP,
    DistributedError,
    launch_argv,
    processes_per_host,
    torch_distributed,
    torchrun_argv,
)

CLUSTER = {"hosts": ["algo-1", "algo-2"], "current_host": "algo-2", "master_addr": "algo-1", "master_port": 7777}
PY = "/usr/bin/python3"


def test_the_sdk_hyperparameter_turns_it_on() -> None:
    assert torch_distributed({TORCH_DISTRIBUTED_HP: True}) and torch_distributed({TORCH_DISTRIBUTED_HP: "true"})
    assert not torch_distributed({}) and not torch_distributed({TORCH_DISTRIBUTED_HP: False})


def test_two_hosts_get_sagemakers_multinode_options() -> None:
    assert torchrun_argv(PY, "train.py", ["--lr", "0.1"], CLUSTER, 1) == [
        PY, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
        "--master_addr", "algo-1", "--master_port", "7777", "--node_rank", "1", "train.py", "--lr", "0.1"]


def test_one_host_gets_a_port_of_its_own_on_loopback() -> None:
    argv = torchrun_argv(PY, "train.py", [], None, 2)
    assert argv[:7] == [PY, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2"]
    assert argv[7:9] == ["--master_addr", "127.0.0.1"] and 0 < int(argv[10]) < 65536 and argv[-1] == "train.py"


def test_workers_per_host_follow_the_gpus() -> None:
    assert processes_per_host({"SM_NUM_GPUS": "4"}) == 4
    assert processes_per_host({"SM_NUM_GPUS": "0"}) == processes_per_host({}) == 1


def test_plain_script_mode_is_left_alone_and_packages_are_refused() -> None:
    plain = [PY, "train.py", "--a", "1"]
    assert launch_argv(plain, "train.py", {}, {"cluster": CLUSTER}, PY) == plain
    on = {TORCH_DISTRIBUTED_HP: True}
    assert launch_argv(plain, "train.py", on, {"cluster": CLUSTER}, PY, {})[-3:] == ["train.py", "--a", "1"]
    with pytest.raises(DistributedError, match="Python packages"):
        launch_argv([PY, "-m", "train", "--a", "1"], "train.py", on, {}, PY, {})
    with pytest.raises(DistributedError, match=r"\*\.py"):
        torchrun_argv(PY, "train.sh", [], CLUSTER, 1)
    with pytest.raises(DistributedError, match="algo-3"):
        torchrun_argv(PY, "train.py", [], {**CLUSTER, "current_host": "algo-3"}, 1)
