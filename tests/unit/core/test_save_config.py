from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from murphy.core.modes import ModeKeys
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.exceptions import SMDebugValueError


def test_save_steps_are_a_union_with_the_interval_and_modulo_is_not_offset() -> None:
    cfg = SaveConfigMode(100, save_steps=[3, 7], start_step=150)
    assert [s for s in range(500) if cfg.should_save_step(s)] == [3, 7, 200, 300, 400]


def test_end_step_is_exclusive() -> None:
    cfg = SaveConfigMode(save_interval=2, start_step=1, end_step=6)
    assert [s for s in range(10) if cfg.should_save_step(s)] == [2, 4]


def test_end_step_zero_stops_a_collection() -> None:
    assert not any(SaveConfigMode(save_interval=1, end_step=0).should_save_step(s) for s in range(5))


def test_defaults_match_smdebug() -> None:
    cfg = SaveConfigMode()
    assert cfg.to_json_dict() == {"save_interval": 500, "save_steps": [], "start_step": 0, "end_step": None}
    assert SaveConfig().should_save_step(ModeKeys.TRAIN, 0)
    assert not SaveConfig().should_save_step(ModeKeys.TRAIN, 1)


@given(
    interval=st.integers(1, 50),
    start=st.integers(0, 100),
    end=st.one_of(st.none(), st.integers(0, 200)),
    steps=st.lists(st.integers(0, 300), max_size=5),
    step=st.integers(0, 300),
)
def test_rule_matches_the_spec_formula(
    interval: int, start: int, end: int | None, steps: list[int], step: int
) -> None:
    cfg = SaveConfigMode(interval, start, end, steps)
    expected = step in steps or (start <= step and (end is None or step < end) and step % interval == 0)
    assert cfg.should_save_step(step) == expected


@pytest.mark.parametrize("bad", [0, -1, "x", True, 1.5])
def test_bad_interval_raises(bad: object) -> None:
    with pytest.raises(SMDebugValueError):
        SaveConfigMode(save_interval=bad)  # type: ignore[arg-type]


def test_json_round_trip_with_unset_modes_as_null() -> None:
    cfg = SaveConfig(mode_save_configs={ModeKeys.TRAIN: SaveConfigMode(3, save_steps=[2, 1], end_step=7)})
    d = cfg.to_json_dict()
    assert d == {
        "TRAIN": {"save_interval": 3, "save_steps": [1, 2], "start_step": 0, "end_step": 7},
        "EVAL": None,
        "PREDICT": None,
        "GLOBAL": None,
    }
    back = SaveConfig.from_json_dict(d)
    assert back == cfg
    assert back.explicit_modes() == {ModeKeys.TRAIN}


def test_general_arguments_apply_to_every_mode() -> None:
    d = SaveConfig(save_interval=1).to_json_dict()
    assert set(d) == {"TRAIN", "EVAL", "PREDICT", "GLOBAL"}
    assert all(v == {"save_interval": 1, "save_steps": [], "start_step": 0, "end_step": None} for v in d.values())


def test_merge_default_takes_only_unset_modes_from_the_other() -> None:
    coll = SaveConfig(mode_save_configs={ModeKeys.EVAL: SaveConfigMode(7)})
    hook = SaveConfig(save_interval=2)
    merged = coll.merge_default(hook)
    assert merged.get_save_config(ModeKeys.EVAL).save_interval == 7
    assert merged.get_save_config(ModeKeys.TRAIN).save_interval == 2
    assert merged.explicit_modes() == frozenset(ModeKeys)
    assert coll.get_save_config(ModeKeys.TRAIN).save_interval == 500  # unchanged, default rule


def test_from_hook_params_general_and_mode_prefixed_keys() -> None:
    params = {"save_interval": "10", "save_steps": "5,1", "train.save_interval": "2", "eval.end_step": "100"}
    cfg = SaveConfig.from_hook_params(params)
    train = cfg.get_save_config(ModeKeys.TRAIN)
    assert (train.save_interval, tuple(train.save_steps), train.end_step) == (2, (1, 5), None)
    ev = cfg.get_save_config(ModeKeys.EVAL)
    assert (ev.save_interval, ev.end_step) == (10, 100)
    assert cfg.get_save_config(ModeKeys.GLOBAL).save_interval == 10


def test_from_hook_params_with_no_keys_leaves_modes_unset() -> None:
    cfg = SaveConfig.from_hook_params({"reductions": "min"})
    assert cfg.explicit_modes() == frozenset()
    assert cfg.merge_default(SaveConfig(save_interval=3)).get_save_config(ModeKeys.TRAIN).save_interval == 3


def test_from_hook_params_prefix_and_only_one_mode() -> None:
    cfg = SaveConfig.from_hook_params({"g.predict.save_interval": "4", "save_interval": "9"}, prefix="g.")
    assert cfg.explicit_modes() == {ModeKeys.PREDICT}
    assert cfg.get_save_config(ModeKeys.PREDICT).save_interval == 4


def test_from_hook_params_rejects_garbage() -> None:
    with pytest.raises(SMDebugValueError):
        SaveConfig.from_hook_params({"save_steps": "1,x"})
    with pytest.raises(SMDebugValueError):
        SaveConfig.from_json_dict({"TRAINING": {}})
