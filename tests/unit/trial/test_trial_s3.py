"""The same reader over a real S3 endpoint (moto's server): StartAfter listing, ranged GETs."""

from __future__ import annotations

import numpy as np
import pytest

from murphy.core.modes import ModeKeys
from murphy.storage import S3ObjectStore
from murphy.trial import create_trial

from .conftest import end, tval, write_colls, write_step

pytestmark = pytest.mark.s3


def test_s3_trial_round_trip(moto_server, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import servers

    for k, v in moto_server.env().items():
        monkeypatch.setenv(k, v)
    bucket = servers.new_bucket(moto_server)
    store = S3ObjectStore(bucket, "job/debug-output", endpoint_url=moto_server.endpoint_url)
    write_colls(store)
    for s in range(4):
        write_step(store, s, {"a": tval("a", s), "b": tval("b", s)}, mode=ModeKeys.TRAIN, mode_step=s)
    trial = create_trial(f"s3://{bucket}/job/debug-output", poll_interval=0.0, end_delay=0.0)
    assert trial.steps() == [0, 1, 2, 3]
    write_step(store, 4, {"a": tval("a", 4)}, mode=ModeKeys.TRAIN, mode_step=4)
    end(store)
    trial.refresh()
    assert trial.loaded_all_steps and trial.steps(ModeKeys.TRAIN) == [0, 1, 2, 3, 4]
    for s in range(5):
        np.testing.assert_array_equal(trial.tensor("a").value(s), tval("a", s))
    assert trial.tensor("b").steps() == [0, 1, 2, 3]
