"""The 2-worker variant of the suite (``run.py --workers 2``): every rule on multi-worker trials.

A multi-instance job writes one series per rank into one trial (issue 17). The variant composes
2-worker trials from the suite's own runs, file by file in smdebug's format (each source run's
events, index and collections files renamed to its worker, ``num_workers`` = 2 in every
collections file, the index files' ``event_file_name`` pointing at the renamed events file):

* **faulty pair**: ``worker_0`` = the healthy twin, ``worker_1`` = the faulty run (same seed, same
  steps): a rule catches the fault only with a finding that names ``worker_1``; a finding that
  names ``worker_0`` (the healthy rank) is counted as a *wrong-worker* alarm, for every rule.
* **healthy pair**: ``worker_0`` = the healthy twin of seed ``s``, ``worker_1`` = that of seed
  ``s + 1`` (cyclically; with one seed the twin twice): two healthy ranks with different data
  and losses, which must stay as quiet as one.

The runs are not synchronised ranks of one data-parallel job (their weights differ), which is
the harder case for a rule that might mix workers: a synchronised pair differs only in its data.
The step manifest (``murphy-manifest/``, an optimisation of the hook) is not copied; the trial
reads the index files.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from murphy.tensorio.locations import (
    COLLECTIONS_PREFIX,
    END_OF_TRAINING_KEY,
    collections_file_key,
    event_file_key,
    index_file_key,
    parse_event_key,
    parse_index_key,
)

from .evaluate import Verdict, evaluate_run


def merge_workers(dst: Path, sources: list[Path]) -> None:
    """Write the trial at ``dst`` whose ``worker_<i>`` is the (one-worker) run ``sources[i]``."""
    for i, src in enumerate(sources):
        worker = f"worker_{i}"
        for path in sorted(p for p in src.rglob("*") if p.is_file()):
            rel = path.relative_to(src).as_posix()
            if rel == END_OF_TRAINING_KEY:
                _put(dst / rel, b"")
            elif rel.startswith(COLLECTIONS_PREFIX) and rel.endswith("_collections.json"):
                doc = json.loads(path.read_bytes())
                doc.setdefault("_meta", {})["num_workers"] = len(sources)
                _put(dst / collections_file_key(worker), json.dumps(doc).encode())
            elif (idx := parse_index_key(rel)) is not None:
                doc = json.loads(path.read_bytes())
                meta = doc.get("meta", {})
                if meta.get("event_file_name"):
                    meta["event_file_name"] = event_file_key(idx[0], worker)
                _put(dst / index_file_key(idx[0], worker), json.dumps(doc).encode())
            elif (ev := parse_event_key(rel)) is not None:
                (dst / event_file_key(ev[0], worker)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dst / event_file_key(ev[0], worker))


def _put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def attribute(verdicts: list[Verdict], faulty: bool) -> tuple[list[Verdict], list[str]]:
    """On a faulty pair, a finding counts only when it names ``worker_1``; the rules whose
    finding named another worker are returned (wrong-worker alarms) and their verdict cleared."""
    if not faulty:
        return verdicts, []
    kept: list[Verdict] = []
    wrong: list[str] = []
    for v in verdicts:
        if v.fired and "on worker_1" not in v.message:
            wrong.append(f"{v.rule}@{v.step}: {v.message[:120]}")
            v = Verdict(v.rule, v.applicable, False, None, "", v.error)
        kept.append(v)
    return kept, wrong


def check_against_alone(out: Path) -> tuple[int, list[str]]:
    """Each rule's finding on every pair under ``out`` against the rule on the pair's two runs
    alone: the pair's must be the earlier of the two (``worker_0`` on a tie), on that worker.
    Returns (rule-pairs that agree, the disagreements)."""
    alone: dict[str, dict[str, Verdict]] = {}

    def verdicts(run: str) -> dict[str, Verdict]:
        if run not in alone:
            alone[run] = {v.rule: v for v in evaluate_run(str(out / run))}
        return alone[run]

    agree, diffs = 0, []
    for pair in sorted(out.glob("2w-*")):
        m = re.match(r"2w-(.+)-(fault|healthy)-seed(\d+)$", pair.name)
        if m is None:
            continue
        fault, kind, seed = m.group(1), m.group(2), int(m.group(3))
        seeds = len(list(out.glob(f"{fault}-healthy-seed*")))
        w0 = f"{fault}-healthy-seed{seed}"
        w1 = f"{fault}-fault-seed{seed}" if kind == "fault" else f"{fault}-healthy-seed{(seed + 1) % seeds}"
        runs = (verdicts(w0), verdicts(w1))
        for v in evaluate_run(str(pair)):
            found = [(r[v.rule].step, i) for i, r in enumerate(runs) if r[v.rule].fired]
            want = min(found, key=lambda x: (x[0] if x[0] is not None else -1, x[1])) if found else None
            got = (v.step, 0 if "on worker_0" in v.message else 1) if v.fired else None
            if got == want:
                agree += 1
            else:
                diffs.append(f"{pair.name} {v.rule}: pair {got}, alone {want}: {v.message[:120]}")
    return agree, diffs
