from __future__ import annotations

import pytest

from murphy.core.reduction_config import ALLOWED_NORMS, ALLOWED_REDUCTIONS, ReductionConfig
from murphy.exceptions import SMDebugValueError


def test_parse_reductions_string() -> None:
    rc = ReductionConfig.from_reductions_string("min,max,abs_mean,l2_norm,abs_l1_norm")
    assert tuple(rc.reductions) == ("min", "max")
    assert tuple(rc.abs_reductions) == ("mean",)
    assert tuple(rc.norms) == ("l2",)
    assert tuple(rc.abs_norms) == ("l1",)
    assert rc.reduction_items() == [("min", False), ("max", False), ("l2", False), ("mean", True), ("l1", True)]


def test_json_form_uses_smdebugs_order() -> None:
    rc = ReductionConfig(["min", "max"], ["mean"], ["l2"], ["l1"], save_raw_tensor=True)
    assert rc.to_json_dict() == {
        "save_raw_tensor": True,
        "reductions": "min,max,l2_norm,abs_mean,abs_l1_norm",
        "save_shape": False,
    }
    assert ReductionConfig.from_json_dict(rc.to_json_dict()) == rc


def test_all_allowed_names_round_trip() -> None:
    rc = ReductionConfig(ALLOWED_REDUCTIONS, ALLOWED_REDUCTIONS, ALLOWED_NORMS, ALLOWED_NORMS, True, True)
    assert ReductionConfig.from_json_dict(rc.to_json_dict()) == rc


@pytest.mark.parametrize("text", ["median", "abs_median", "l3_norm", "min,foo"])
def test_unknown_reductions_raise(text: str) -> None:
    with pytest.raises(SMDebugValueError):
        ReductionConfig.from_reductions_string(text)


@pytest.mark.parametrize("value", ["True", "true", 1, None])
def test_save_raw_tensor_must_be_a_real_bool(value: object) -> None:
    with pytest.raises(SMDebugValueError):
        ReductionConfig.from_json_dict({"reductions": "", "save_raw_tensor": value})
    with pytest.raises(SMDebugValueError):
        ReductionConfig(save_shape=value)  # type: ignore[arg-type]


def test_empty_and_whitespace() -> None:
    rc = ReductionConfig.from_reductions_string(" min , ,max ")
    assert tuple(rc.reductions) == ("min", "max")
    assert not ReductionConfig().has_reductions
    assert rc.has_reductions


def test_from_hook_params_is_lenient_about_string_booleans() -> None:
    rc = ReductionConfig.from_hook_params({"reductions": "mean", "save_raw_tensor": "TRUE"})
    assert rc is not None and rc.save_raw_tensor and tuple(rc.reductions) == ("mean",)
    assert ReductionConfig.from_hook_params({"save_interval": "3"}) is None
    with pytest.raises(SMDebugValueError):
        ReductionConfig.from_hook_params({"reductions": "mean", "save_raw_tensor": "yes"})
