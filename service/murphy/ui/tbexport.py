"""``murphy tensorboard export``: any smdebug-format trial (murphy's or smdebug's, a path or an
``s3://`` URI) to TensorBoard event files, incrementally.

The logdir gets one run per mode (``TRAIN/``, ``EVAL/``, ``GLOBAL/``...) with the same tags as the
hook's own TensorBoard output (``<collection>/<tensor>``, ``nonfinite/<tensor>/...``; see
``murphy.tensorio.summary.step_summaries``); steps are global steps, as the rules report them.
``<logdir>/.murphy-export.json`` remembers the last exported step, so running it again (or
``--follow`` on a live job) writes only the steps saved since, into a new file per run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from murphy.core.modes import ModeKeys
from murphy.exceptions import MurphyError, SMDebugError
from murphy.tensorio.summary import EventFileWriter, step_summaries
from murphy.trial import Trial, create_trial

STATE_FILE = ".murphy-export.json"


def _state(logdir: str) -> dict[str, Any]:
    try:
        with open(os.path.join(logdir, STATE_FILE), encoding="utf-8") as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(logdir: str, doc: dict[str, Any]) -> None:
    path = os.path.join(logdir, STATE_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(path + ".tmp", path)


def export_once(trial: Trial, logdir: str) -> int:
    """Write the trial's complete steps past the last export; returns how many steps."""
    os.makedirs(logdir, exist_ok=True)
    state = _state(logdir)
    last = state.get("last_step")
    colls = list(trial.collections().values())
    steps = [s for s in trial.steps() if last is None or s > last]
    writers: dict[ModeKeys, EventFileWriter] = {}
    suffix = f"murphy{int(time.time() * 1000)}"
    try:
        for step in steps:
            mode = trial.mode(step) or ModeKeys.GLOBAL
            items = []
            for name in trial.tensor_names(step=step):
                try:
                    value = trial.tensor(name).value(step)
                except (SMDebugError, MurphyError):  # reductions only, or a damaged record
                    continue
                found = [(c.name, c.save_histogram) for c in colls if c.matches(name)]
                items.append((name, value, found or [("default", True)]))
            events = step_summaries(step, items)
            if events:
                writer = writers.get(mode)
                if writer is None:
                    writer = writers[mode] = EventFileWriter(os.path.join(logdir, mode.name), suffix)
                for ev in events:
                    writer.write(ev)
    finally:
        for writer in writers.values():
            writer.close()
    if steps:
        _save_state(logdir, {"last_step": steps[-1], "trial": trial.path})
    return len(steps)


def export(path: str, logdir: str, *, follow: bool = False, poll_s: float = 2.0,
           say: Callable[[str], None] = print) -> int:
    """Export ``path`` to ``logdir``; with ``follow``, keep exporting until training ends."""
    trial = create_trial(path, no_marker_timeout=None if follow else 0)
    total = 0
    while True:
        n = export_once(trial, logdir)
        total += n
        if n:
            say(f"exported {n} step(s) to {logdir}")
        if not follow or trial.loaded_all_steps:
            return total
        time.sleep(poll_s)
        trial.refresh()
