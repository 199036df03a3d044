from __future__ import annotations

import json

import pytest

from murphy.core.collection import SCALAR_COLLECTIONS, Collection, CollectionKeys, CollectionsDoc
from murphy.core.modes import ModeKeys
from murphy.core.reduction_config import ReductionConfig
from murphy.core.save_config import SaveConfig, SaveConfigMode
from murphy.exceptions import CorruptCollections, InvalidCollectionConfiguration

# Written by smdebug 1.0.34's CollectionManager.export (weights with configs, losses without).
SMDEBUG_FILE = (
    b'{"collections": {"weights": {"name": "weights", "include_regex": ["^(?!gradient).*weight"], '
    b'"tensor_names": ["a", "b"], "reduction_config": {"save_raw_tensor": true, "reductions": '
    b'"min,max,l2_norm,abs_mean,abs_l1_norm", "save_shape": false}, "save_config": {"TRAIN": '
    b'{"save_interval": 3, "save_steps": [1, 2], "start_step": 0, "end_step": 7}, "EVAL": null, '
    b'"PREDICT": null, "GLOBAL": null}, "save_histogram": true}, "losses": {"name": "losses", '
    b'"include_regex": ["loss"], "tensor_names": [], "reduction_config": null, "save_config": null, '
    b'"save_histogram": true}}, "_meta": {"num_workers": 1}}'
)


def test_smdebug_file_round_trips_byte_for_byte() -> None:
    doc = CollectionsDoc.from_json_bytes(SMDEBUG_FILE)
    assert doc.num_workers == 1
    w = doc.collections["weights"]
    assert w.matches("Net_fc1.weight") and not w.matches("gradient/Net_fc1.weight")
    assert w.reduction_config is not None and tuple(w.reduction_config.abs_norms) == ("l1",)
    assert w.save_config is not None and w.save_config.explicit_modes() == {ModeKeys.TRAIN}
    assert doc.to_json_bytes() == SMDEBUG_FILE


def test_built_ins() -> None:
    assert CollectionKeys.OPTIMIZER_VARIABLES == "optimizer_variables"
    assert CollectionKeys.FEATURE_IMPORTANCE == "feature_importance"
    assert {"losses", "metrics", "feature_importance", "average_shap", "sm_metrics"} == SCALAR_COLLECTIONS


def test_matching_uses_search_and_explicit_names() -> None:
    c = Collection("c", include_regex="fc1")
    c.include(["^b", "fc1"])
    assert c.include_regex == ["fc1", "^b"]
    assert c.matches("Net_fc1.weight") and c.matches("bias") and not c.matches("xb")
    c.add_tensor_name("xb")
    assert c.matches("xb") and c.has_tensor_name("xb")


def test_tensor_names_are_sorted_in_json() -> None:
    c = Collection("c", tensor_names=["z", "a", "m"])
    d = c.to_json_dict()
    assert d["tensor_names"] == ["a", "m", "z"]
    assert Collection.from_json_dict(d) == c


def test_full_collection_round_trip() -> None:
    c = Collection(
        "weights",
        include_regex=["w"],
        reduction_config=ReductionConfig(["mean"], save_raw_tensor=True),
        save_config=SaveConfig(save_interval=1),
        save_histogram=False,
    )
    doc = CollectionsDoc({"weights": c}, num_workers=4)
    parsed = json.loads(doc.to_json_bytes())
    assert parsed["_meta"] == {"num_workers": 4}
    assert parsed["collections"]["weights"]["save_config"]["GLOBAL"] == SaveConfigMode(1).to_json_dict()
    back = CollectionsDoc.from_json_bytes(doc.to_json_bytes())
    assert back.collections["weights"] == c and back.num_workers == 4


def test_bad_regex_raises_configuration_error() -> None:
    with pytest.raises(InvalidCollectionConfiguration):
        Collection("c", include_regex="(")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b"[]",
        b'{"collections": {}}',
        b'{"collections": [], "_meta": {"num_workers": 1}}',
        b'{"collections": {}, "_meta": {"num_workers": 0}}',
        b'{"collections": {}, "_meta": {"num_workers": "1"}}',
        b'{"collections": {"a": 1}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "include_regex": "x"}}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "include_regex": ["("]}}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "reduction_config": {"save_raw_tensor": "True"}}}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "save_config": {"TRAIN": {"save_interval": 0}}}}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "save_config": [1]}}, "_meta": {"num_workers": 1}}',
        b'{"collections": {"a": {"name": "a", "save_histogram": "yes"}}, "_meta": {"num_workers": 1}}',
    ],
)
def test_bad_collections_files_raise_corrupt_collections(data: bytes) -> None:
    with pytest.raises(CorruptCollections) as info:
        CollectionsDoc.from_json_bytes(data)
    assert str(info.value)


def test_torn_real_file_raises_corrupt_collections() -> None:
    for cut in range(0, len(SMDEBUG_FILE) - 1, 7):
        with pytest.raises(CorruptCollections):
            CollectionsDoc.from_json_bytes(SMDEBUG_FILE[:cut])
