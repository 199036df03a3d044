"""Save decisions of the framework-neutral hook, read back from the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from murphy.core.collection import CollectionsDoc
from murphy.exceptions import HookError, SMDebugRuntimeError
from murphy.hook import ModeKeys, ReductionConfig, SaveConfig, SaveConfigMode
from murphy.hook.base import BaseHook
from murphy.hook.outdir import OutDirAlreadyEnded
from murphy.storage import open_store
from murphy.tensorio.locations import parse_index_key
from murphy.tensorio.reader import read_index, read_tensor_record


def saved(out: Path) -> dict[int, tuple[str, int, list[str]]]:
    """{global step: (mode name, mode step, tensor names)} from the index files."""
    store = open_store(str(out))
    result: dict[int, tuple[str, int, list[str]]] = {}
    for key in store.list("index/"):
        parsed = parse_index_key(key)
        assert parsed is not None
        idx = read_index(store, key)
        result[parsed[0]] = (idx.mode.name, idx.mode_step, sorted(e.tensorname for e in idx.tensors))
    return result


def run(hook: BaseHook, modes: list[ModeKeys], tensors: dict[str, float]) -> None:
    for mode in modes:
        hook.set_mode(mode)
        hook._begin_step()
        for name, value in tensors.items():
            hook._save(name, np.full((2, 2), value, dtype=np.float32))
    hook.close()


def test_interval_save_steps_union_and_exclusive_end(tmp_path: Path) -> None:
    cfg = SaveConfig(save_interval=4, start_step=3, end_step=12, save_steps=[1, 2])
    hook = BaseHook(tmp_path, save_config=cfg, include_collections=["weights"])
    run(hook, [ModeKeys.TRAIN] * 14, {"fc.weight": 1.0})
    assert sorted(saved(tmp_path)) == [1, 2, 4, 8]  # 0 < start, 12 == end (exclusive)


def test_a_collection_changed_mid_step_redecides_names_already_seen(tmp_path: Path) -> None:
    # The per-name decisions live in the collections: changing one drops them at once.
    hook = BaseHook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights"])
    value = np.ones((2, 2), dtype=np.float32)
    hook._begin_step()
    hook._save("custom_x", value)  # decided: not saved
    hook.add_to_collection("weights", "custom_x")
    hook._save("custom_x", value)
    hook._begin_step()
    hook._save("custom_x", value)
    hook.get_collection("weights").tensor_names.discard("custom_x")
    hook._save("custom_x", value)  # no longer a member: not saved again at this step
    hook.close()
    assert saved(tmp_path) == {0: ("GLOBAL", 0, ["custom_x"]), 1: ("GLOBAL", 1, ["custom_x"])}


def test_modes_count_separately_and_eval_skips_gradients(tmp_path: Path) -> None:
    hook = BaseHook(tmp_path, save_config=SaveConfig(save_interval=2), include_collections=["weights", "gradients"])
    modes = [ModeKeys.TRAIN, ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.EVAL]
    run(hook, modes, {"fc.weight": 1.0, "gradient/fc.weight": 2.0})
    got = saved(tmp_path)
    assert got == {
        0: ("TRAIN", 0, ["fc.weight", "gradient/fc.weight"]),
        2: ("EVAL", 0, ["fc.weight"]),
        3: ("TRAIN", 2, ["fc.weight", "gradient/fc.weight"]),
        5: ("EVAL", 2, ["fc.weight"]),
    }


def test_per_mode_config_and_collection_override(tmp_path: Path) -> None:
    hook_cfg = SaveConfig(mode_save_configs={ModeKeys.TRAIN: SaveConfigMode(save_interval=3)})
    hook = BaseHook(tmp_path, save_config=hook_cfg, include_collections=["weights", "biases"])
    # biases: TRAIN overridden to every 2 steps; EVAL unset in the collection → the hook's
    hook.get_collection("biases").save_config = SaveConfig(
        mode_save_configs={ModeKeys.TRAIN: SaveConfigMode(save_interval=2)}
    )
    run(hook, [ModeKeys.TRAIN] * 7, {"fc.weight": 1.0, "fc.bias": 2.0})
    got = {s: names for s, (_, _, names) in saved(tmp_path).items()}
    assert got == {0: ["fc.bias", "fc.weight"], 2: ["fc.bias"], 3: ["fc.weight"], 4: ["fc.bias"], 6: ["fc.bias", "fc.weight"]}
    doc = CollectionsDoc.from_json_bytes((tmp_path / "collections/000000000/worker_0_collections.json").read_bytes())
    biases = doc.collections["biases"].save_config
    assert biases is not None
    assert biases.get_save_config(ModeKeys.TRAIN).save_interval == 2
    assert biases.get_save_config(ModeKeys.EVAL).save_interval == 500  # inherited default


def test_default_config_saves_losses_only_every_500(tmp_path: Path) -> None:
    hook = BaseHook(tmp_path)
    run(hook, [ModeKeys.TRAIN] * 3, {"fc.weight": 1.0, "MSELoss_output_0": 0.5})
    assert saved(tmp_path) == {0: ("TRAIN", 0, ["MSELoss_output_0"])}


def test_include_regex_goes_to_default_and_save_all_to_all(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    run(BaseHook(a, save_config=SaveConfig(save_interval=1), include_regex=["^custom"]), [ModeKeys.TRAIN],
        {"custom_x": 1.0, "other": 2.0})
    assert saved(a)[0][2] == ["custom_x"]
    run(BaseHook(b, save_config=SaveConfig(save_interval=1), save_all=True), [ModeKeys.TRAIN],
        {"custom_x": 1.0, "other": 2.0})
    assert saved(b)[0][2] == ["custom_x", "other"]
    doc = json.loads((a / "collections/000000000/worker_0_collections.json").read_text())
    assert doc["collections"]["default"]["include_regex"] == ["^custom"]
    assert doc["collections"]["default"]["tensor_names"] == ["custom_x"]
    assert doc["_meta"] == {"num_workers": 1}


def test_reductions_order_values_and_scalars_never_reduced(tmp_path: Path) -> None:
    red = ReductionConfig(reductions=["max", "std"], abs_reductions=["mean"], norms=["l1"], abs_norms=["l2"])
    hook = BaseHook(tmp_path, reduction_config=red, save_config=SaveConfig(save_interval=1),
                    include_collections=["weights"])
    value = np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32)
    hook._begin_step()
    hook._save("fc.weight", value)
    hook._save("MSELoss_output_0", np.float32(0.25))
    hook.close()
    store = open_store(str(tmp_path))
    idx = read_index(store, "index/000000000/000000000000_worker_0.json")
    names = [e.tensorname for e in idx.tensors]
    assert names == [
        "smdebug/reductions/max/fc.weight",
        "smdebug/reductions/std/fc.weight",
        "smdebug/reductions/l1/fc.weight",
        "smdebug/reductions/abs_mean/fc.weight",
        "smdebug/reductions/abs_l2/fc.weight",
        "MSELoss_output_0",
    ]
    values = {e.tensorname: read_tensor_record(store, idx.event_file_name, e.start_idx, e.length).value
              for e in idx.tensors}
    assert values["smdebug/reductions/max/fc.weight"] == pytest.approx(value.max())
    assert values["smdebug/reductions/std/fc.weight"] == pytest.approx(np.std(value, ddof=1))
    assert values["smdebug/reductions/l1/fc.weight"] == pytest.approx(np.abs(value).sum())
    assert values["smdebug/reductions/abs_mean/fc.weight"] == pytest.approx(np.abs(value).mean())
    assert values["smdebug/reductions/abs_l2/fc.weight"] == pytest.approx(np.linalg.norm(value))
    assert values["MSELoss_output_0"] == pytest.approx(0.25)


def test_save_shape_without_raw(tmp_path: Path) -> None:
    hook = BaseHook(tmp_path, reduction_config=ReductionConfig(save_shape=True), save_config=SaveConfig(save_interval=1),
                    include_collections=["weights"])
    hook._begin_step()
    hook._save("fc.weight", np.zeros((3, 5), dtype=np.float32))
    hook.close()
    idx = read_index(open_store(str(tmp_path)), "index/000000000/000000000000_worker_0.json")
    assert idx.tensors == []
    assert [(s.tensorname, tuple(s.shape)) for s in idx.shapes] == [("fc.weight", (3, 5))]


def test_save_scalar_and_save_tensor(tmp_path: Path) -> None:
    hook = BaseHook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook._begin_step()
    hook.save_scalar("lr", 0.1)
    hook.save_tensor("my_tensor", np.arange(3), collections_to_write="custom")
    hook.close()
    names = saved(tmp_path)[0][2]
    assert names == ["my_tensor", "scalar/lr"]
    doc = json.loads((tmp_path / "collections/000000000/worker_0_collections.json").read_text())
    assert doc["collections"]["custom"]["tensor_names"] == ["my_tensor"]


def test_end_marker_and_refusal_of_ended_dir(tmp_path: Path) -> None:
    BaseHook(tmp_path).close()
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""
    assert (tmp_path / "collections/000000000/worker_0_collections.json").exists()
    with pytest.raises(OutDirAlreadyEnded, match=r"training_job_end\.ts"):
        BaseHook(tmp_path)
    assert issubclass(OutDirAlreadyEnded, SMDebugRuntimeError) and issubclass(OutDirAlreadyEnded, HookError)


def test_no_end_marker_inside_sagemaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_JOB_NAME", "job")
    BaseHook(tmp_path / "a").close()
    assert not (tmp_path / "a" / "training_job_end.ts").exists()
    BaseHook(tmp_path / "b", write_end_marker=True).close()
    assert (tmp_path / "b" / "training_job_end.ts").exists()


def test_workers_one_vs_all(tmp_path: Path) -> None:
    cfg = SaveConfig(save_interval=1)
    for rank in (0, 1):
        run(BaseHook(tmp_path / "one", save_config=cfg, rank=rank, world_size=2, write_end_marker=False),
            [ModeKeys.TRAIN], {"MSELoss_output_0": 1.0})
        run(BaseHook(tmp_path / "all", save_config=cfg, include_workers="all", rank=rank, world_size=2,
                     write_end_marker=False), [ModeKeys.TRAIN], {"MSELoss_output_0": 1.0})
    one = sorted(p.name for p in (tmp_path / "one/collections/000000000").iterdir())
    assert one == ["worker_0_collections.json"]
    assert json.loads((tmp_path / "one/collections/000000000/worker_0_collections.json").read_text())["_meta"] == {"num_workers": 1}
    every = sorted(p.name for p in (tmp_path / "all/events/000000000000").iterdir())
    assert every == ["000000000000_worker_0.tfevents", "000000000000_worker_1.tfevents"]
    meta = json.loads((tmp_path / "all/collections/000000000/worker_1_collections.json").read_text())["_meta"]
    assert meta == {"num_workers": 2}


def test_collections_file_written_at_next_step_start(tmp_path: Path) -> None:
    hook = BaseHook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook._begin_step()
    hook._save("MSELoss_output_0", np.float32(1.0))
    coll = tmp_path / "collections/000000000/worker_0_collections.json"
    hook._begin_step()  # step 0 handed over, collections queued behind it
    hook._writer.flush()
    assert coll.exists() and (tmp_path / "index/000000000/000000000000_worker_0.json").exists()
    assert not (tmp_path / "index/000000000/000000000001_worker_0.json").exists()
    hook.close()


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    run(BaseHook(tmp_path / "d", dry_run=True, save_config=SaveConfig(save_interval=1)), [ModeKeys.TRAIN],
        {"MSELoss_output_0": 1.0})
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").rglob("*.json"))


def test_bad_arguments() -> None:
    with pytest.raises(HookError, match="include_workers"):
        BaseHook("memory://x", include_workers="two")
    with pytest.raises(HookError, match="out_dir is required"):
        BaseHook(None)
