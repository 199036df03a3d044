from __future__ import annotations

import pytest

from murphy.exceptions import SMDebugValueError
from murphy.tensorio import locations as loc


def test_key_patterns() -> None:
    assert loc.event_file_key(1234, "worker_0") == "events/000000001234/000000001234_worker_0.tfevents"
    assert loc.index_file_key(1234, "worker_0") == "index/000000001/000000001234_worker_0.json"
    assert loc.index_file_key(999) == "index/000000000/000000000999_worker_0.json"
    assert loc.collections_file_key("worker_3") == "collections/000000000/worker_3_collections.json"
    assert loc.END_OF_TRAINING_KEY == "training_job_end.ts"
    assert loc.INDEX_PREFIX == "index/" and loc.COLLECTIONS_PREFIX == "collections/000000000/"


def test_lexical_order_is_step_order() -> None:
    keys = [loc.index_file_key(s) for s in (0, 5, 999, 1000, 1001, 12345, 10**9)]
    assert sorted(keys) == keys


def test_parsing() -> None:
    assert loc.parse_index_key("index/000000001/000000001234_worker_0.json") == (1234, "worker_0")
    assert loc.parse_index_key("run/x/index/000000001/000000001234_worker_0.json") == (1234, "worker_0")
    assert loc.parse_index_key("index/000000001/000000001234_worker_0.json.tmp") is None
    assert loc.parse_index_key("events/000000001234/000000001234_worker_0.tfevents") is None
    assert loc.parse_event_key(loc.event_file_key(7, "worker_2")) == (7, "worker_2")
    assert loc.worker_from_collections_key("collections/000000000/worker_1_collections.json") == "worker_1"
    assert loc.worker_from_collections_key("collections/000000000/readme.txt") is None


def test_device_worker_names_are_escaped_both_ways() -> None:
    device = "/job:worker/replica:0/task:1/device:GPU:0"
    assert loc.escape_worker(device) == "_job-worker_replica-0_task-1_device-GPU-0"
    key = loc.index_file_key(3, device)
    assert key == "index/000000000/000000000003__job-worker_replica-0_task-1_device-GPU-0.json"
    assert loc.parse_index_key(key) == (3, device)
    assert loc.worker_from_collections_key(loc.collections_file_key(device)) == device
    assert loc.escape_worker(loc.escape_worker(device)) == loc.escape_worker(device)


def test_reduction_names() -> None:
    assert loc.reduction_tensor_name("Net_fc1.weight", "mean") == "smdebug/reductions/mean/Net_fc1.weight"
    name = loc.reduction_tensor_name("gradient/Net_fc1.bias", "l2", abs_=True)
    assert name == "smdebug/reductions/abs_l2/gradient/Net_fc1.bias"
    assert loc.parse_reduction_name(name) == ("gradient/Net_fc1.bias", "l2", True)
    assert loc.parse_reduction_name("smdebug/reductions/median/x") is None
    assert loc.parse_reduction_name("smdebug/reductions/mean/") is None
    assert loc.parse_reduction_name("Net_fc1.weight") is None
    assert loc.strip_output_index("dense/kernel:0") == "dense/kernel"


@pytest.mark.parametrize("bad", [-1, True, "3"])
def test_bad_steps(bad: object) -> None:
    with pytest.raises(SMDebugValueError):
        loc.event_file_key(bad)  # type: ignore[arg-type]
