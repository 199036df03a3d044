"""smdebug 1.0.34's reader and rule API, call by call: murphy's answers equal smdebug's own on
data the REAL smdebug hook writes, step by step, on a local directory and on S3 (moto).

The writer and smdebug's reader run in the smdebug venv (smdebug_side/stepper.py, driven line by
line); murphy's reader runs here. Both ask the same questions (reader_probe.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import compat_harness as h
import pytest
import reader_probe
from stepping import Stepper, Store, blank_event_file_names, both, finished_run, smdebug_modes

import servers
from murphy.exceptions import MissingCollectionFiles, SMDebugValueError
from murphy.trial import create_trial, modes

pytestmark = [pytest.mark.compat, pytest.mark.slow]

# Far longer than the test: a reader that only re-lists once per poll interval answers stale.
SLOW_POLL = 600.0


STORES = ["local", pytest.param("moto", marks=pytest.mark.s3)]


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store(request.param, tmp_path, request)
    if s.server is not None:
        for k, v in s.server.env().items():
            monkeypatch.setenv(k, v)
    return s


@pytest.fixture
def stepper(smdebug_python: str, store: Store) -> Iterator[Stepper]:
    st = Stepper(smdebug_python, store.env)
    yield st
    st.stop()


# --- 1. fresh reads, and (6b) last_index_token ----------------------------------------------


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_direct_calls_see_a_step_right_after_it_is_written(stepper: Stepper, store: Store) -> None:
    """A trial opened before a step is written answers for it as soon as it is on the store,
    whatever the poll interval (smdebug lists on every call); last_index_token is smdebug's."""
    stepper("hook", out=store.uri)
    stepper("step")
    stepper("step")  # step 0's index file and the collections are now on the store
    trial = create_trial(store.uri, poll_interval=SLOW_POLL)
    stepper("open", path=store.uri)
    ask = [0, 1, 2, 3]
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=ask)
    assert mine == theirs
    assert mine["steps"] == [0] and mine["passed_1"] == "NOT_YET_AVAILABLE"
    assert mine["value_1"] == {"error": "StepNotYetAvailable"}

    stepper("step")  # publishes step 1
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=ask)
    assert mine == theirs
    assert mine["steps"] == [0, 1] and mine["passed_1"] == "AVAILABLE" and mine["loss_steps"] == [0, 1]
    assert mine["last_index_token"] == theirs["last_index_token"] is not None
    assert mine["last_index_token"].endswith("index/000000000/000000000001_worker_0.json")

    stepper("close")  # step 2 and the end marker
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=ask)
    assert mine == theirs
    assert mine["steps"] == [0, 1, 2] and mine["loaded_all_steps"] is True
    assert mine["passed_3"] == "UNAVAILABLE" and trial.training_has_ended()  # murphy's extension


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_settled_answers_need_no_request(stepper: Stepper, store: Store) -> None:
    """The cheap side of freshness: a value of a known step, an AVAILABLE step and the answers of
    a finished trial come without listing the store again."""
    finished_run(stepper, store, steps=3)
    trial = create_trial(store.uri)
    listed: list[str] = []
    real_list = trial.store.list

    def counting_list(prefix: str = "", start_after: str | None = None) -> Iterator[str]:
        listed.append(prefix)
        return real_list(prefix, start_after)

    trial.store.list = counting_list  # type: ignore[method-assign]
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2] and trial.has_passed_step(1).name == "AVAILABLE"
    trial.tensor(reader_probe.LOSS).value(2)
    assert listed == []


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_skipped_steps_while_training_runs(stepper: Stepper, store: Store) -> None:
    """save_interval=2, asked mid-run: a skipped step is UNAVAILABLE / StepUnavailable once a
    later step is complete, a future one NOT_YET_AVAILABLE / StepNotYetAvailable."""
    stepper("hook", out=store.uri, save_interval=2)
    for _ in range(5):
        stepper("step")  # steps 0 and 2 published (at the next step's start); 4 still open
    trial = create_trial(store.uri, poll_interval=SLOW_POLL)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=[0, 1, 2, 3, 4, 5])
    assert mine == theirs
    assert (mine["steps"], mine["passed_1"], mine["passed_5"]) == ([0, 2], "UNAVAILABLE", "NOT_YET_AVAILABLE")
    mine, theirs = both(stepper, trial, "waits", steps_to_wait=[0, 1, 2])
    assert mine == theirs and mine["wait_1"].startswith("StepUnavailable: Step 1 of mode GLOBAL")
    stepper("close")
    mine, theirs = both(stepper, trial, "waits", steps_to_wait=[3, 4, 5, 7])
    assert mine == theirs and mine["wait_4"] is None and mine["wait_7"].startswith("NoMoreData")


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_empty_trial_matches_smdebug(stepper: Stepper, store: Store) -> None:
    """A hook closed before any step: collections and the end marker, no index file."""
    stepper("hook", out=store.uri)
    stepper("close")
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=[0])
    assert mine == theirs
    assert (mine["steps"], mine["passed_0"], mine["tensor_names"]) == ([], "UNAVAILABLE", [])
    mine, theirs = both(stepper, trial, "waits", steps_to_wait=[0])
    assert mine == theirs and mine["wait_0"].startswith("NoMoreData")


# --- after the end: waits, lookups and smdebug's other public names --------------------------


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_finished_run_lookups_match_smdebug(stepper: Stepper, store: Store) -> None:
    finished_run(stepper, store)
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "after_end")
    assert mine == theirs
    assert mine["wait_past_end"] == {"error": "NoMoreData"}
    assert [a["array"] for a in mine["labels"]] != [], "labels_2 / labels_10 were saved"


# --- 2. context managers ---------------------------------------------------------------------


@pytest.mark.parametrize("store", ["local"], indirect=True)
def test_no_refresh_and_refresh_yield_the_trials(stepper: Stepper, store: Store) -> None:
    finished_run(stepper, store, steps=2)
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "contexts")
    # smdebug's context managers set the flag to a constant on exit (refresh() leaves it False);
    # murphy's restore what was there before. Deliberate, see docs/compat.md.
    assert (mine.pop("after"), theirs.pop("after")) == (True, False)
    assert mine == theirs
    assert mine["no_refresh_list_yields_trial"] and mine["no_refresh_single_yields_trial"]
    assert mine["inside_no_refresh"] is False and mine["inside_refresh"] is True


# --- 3. RequiredTensors ----------------------------------------------------------------------


@pytest.mark.parametrize("store", ["local"], indirect=True)
def test_required_tensors_get_and_get_tensor_steps(stepper: Stepper, store: Store) -> None:
    finished_run(stepper, store, steps=3)
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "required_tensors")
    assert mine == theirs
    assert len(mine["seen"]) == 3 and mine["seen"][1]["steps"][reader_probe.LOSS] == [1, 0]
    assert mine["unknown_name"] == {"error": "TensorUnavailable"}


# --- 4. collection(name) ---------------------------------------------------------------------


@pytest.mark.parametrize("store", ["local"], indirect=True)
def test_unknown_collection_is_created_empty(stepper: Stepper, store: Store) -> None:
    finished_run(stepper, store, steps=2)
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "collection")
    assert mine == theirs
    assert mine["listed_after"] and mine["tensor_names"] == [] and mine["same_object"]


# --- 5. create_trial's path ------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_create_trial_strips_whitespace(stepper: Stepper, store: Store) -> None:
    finished_run(stepper, store, steps=2)
    padded = f"  {store.uri}\n "
    trial = create_trial(padded)
    theirs_open = stepper("open", path=padded)
    # smdebug's S3 trial path ends with "/" (it joins bucket and prefix); murphy's is the URI.
    assert (trial.name, trial.path) == (theirs_open["name"], theirs_open["path"].rstrip("/"))
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=[0, 1])
    assert mine == theirs and mine["steps"] == [0, 1]


@pytest.mark.parametrize("store", ["local"], indirect=True)
def test_create_trial_keywords_match_smdebug(stepper: Stepper, store: Store) -> None:
    """range_steps keeps begin <= step < end; parallel and cache are accepted, as in smdebug."""
    finished_run(stepper, store, steps=5)
    kwargs = {"range_steps": (1, 3), "parallel": False, "cache": True}
    trial = create_trial(store.uri, **kwargs)  # type: ignore[arg-type]
    stepper("open", path=store.uri, kwargs=kwargs)
    mine, theirs = both(stepper, trial, "fresh", steps_to_ask=[0, 1, 2, 3])
    assert mine == theirs and mine["steps"] == [1, 2]


def test_create_trial_refuses_a_path_that_cannot_exist(tmp_path: Path) -> None:
    """smdebug waits forever below a regular file; murphy says why at once."""
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    started = time.monotonic()
    with pytest.raises(MissingCollectionFiles, match="is a file, not a directory"):
        create_trial(f"  {blocker}/trial ")
    assert time.monotonic() - started < 5
    with pytest.raises(SMDebugValueError):
        create_trial("   ")


@pytest.mark.s3
def test_create_trial_on_a_missing_bucket_fails_fast(moto_server: servers.S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in moto_server.env().items():
        monkeypatch.setenv(k, v)
    started = time.monotonic()
    with pytest.raises(MissingCollectionFiles, match="bucket"):
        create_trial("s3://no-such-bucket-murphy-compat/run", no_marker_timeout=None)
    assert time.monotonic() - started < 10


# --- 6. index entries without an events file -------------------------------------------------


@pytest.mark.parametrize("store", STORES, indirect=True)
@pytest.mark.parametrize("spelling", ["missing", "empty"])
def test_shape_only_index_files(stepper: Stepper, store: Store, spelling: str) -> None:
    """save_shape without raw tensors: smdebug's index meta has no event_file_name (or "");
    the steps, names and shapes are still there, values are not."""
    finished_run(stepper, store, steps=3, save_shape=True, save_raw=False)
    if spelling == "empty":
        blank_event_file_names(store)
    trial = create_trial(store.uri)
    stepper("open", path=store.uri)
    mine, theirs = both(stepper, trial, "shapes")
    # Where a record's events file name is "" smdebug tries to read the trial directory itself
    # and fails with whatever that raises (IsADirectoryError locally, IndexReaderException on
    # S3); murphy answers with smdebug's own lookup error. Everything else must be equal.
    unreadable = {"IsADirectoryError", "IndexReaderException"}
    own_error = {"value": "TensorUnavailableForStep", "shape": "ShapeUnavailableForStep"}
    for key, answer in list(theirs.items()):
        if isinstance(answer, dict) and answer.get("error") in unreadable:
            assert spelling == "empty", (key, answer)
            assert mine[key] == {"error": own_error[key.rsplit("|", 1)[1]]}, key
            del mine[key], theirs[key]
    assert mine == theirs
    assert mine["steps"] == [0, 1, 2] == mine["steps_incomplete"]
    shapes = {k: v for k, v in mine.items() if k.endswith("|shape") and "relu" in k}
    assert shapes and all(v == [5, 3] for v in shapes.values()), shapes  # saved as shapes only
    values = {k: v for k, v in mine.items() if k.endswith("|value") and "relu" in k}
    assert all(v == {"error": "TensorUnavailableForStep"} for v in values.values()), values


# --- 7. smdebug's own modes ------------------------------------------------------------------


def test_smdebug_modes_are_accepted_by_value(smdebug_local_run: h.Run, smdebug_python: str) -> None:
    """A notebook importing both libraries passes smdebug's modes.TRAIN: same answers as murphy's."""
    smd_modes = smdebug_modes(smdebug_python)
    assert smd_modes is not modes and type(smd_modes.TRAIN) is not type(modes.TRAIN)
    ref = smdebug_local_run.read("smdebug", smdebug_python, where="local")[0]
    trial = create_trial(str(smdebug_local_run.local_dir))
    for name in ("TRAIN", "EVAL"):
        theirs = getattr(smd_modes, name)
        assert trial.steps(mode=theirs) == trial.steps(mode=getattr(modes, name)) == ref["steps"][name] != []
        loss = trial.tensor(reader_probe.LOSS)
        assert loss.steps(mode=theirs) == ref["tensors"][reader_probe.LOSS][name]
        first = ref["steps"][name][0]
        assert loss.value(first, mode=theirs).tobytes() == loss.value(first, mode=getattr(modes, name)).tobytes()
        assert trial.global_step(theirs, first) == ref["global_step"][name][str(first)]
        assert trial.has_passed_step(first, mode=theirs).name == "AVAILABLE"
        g = ref["global_step"][name][str(first)]
        assert trial.mode(g) == theirs and theirs == trial.mode(g) and trial.mode(g) is getattr(modes, name)
        assert {theirs: 1}.get(trial.mode(g)) == 1 and {trial.mode(g): 1}.get(theirs) == 1
        assert trial.mode(g) != smd_modes.PREDICT
    assert trial.tensor_names(mode=smd_modes.EVAL) == trial.tensor_names(mode=modes.EVAL)
    assert trial.steps(mode="train") == ref["steps"]["TRAIN"]
    for bad in (1, "training", object()):
        with pytest.raises(SMDebugValueError, match="Valid modes are"):
            trial.steps(mode=bad)
