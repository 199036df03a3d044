"""Score the verdicts against the labels and print / render the tables."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .evaluate import OVERRIDES, RULES, Verdict

RECALL_TARGET = 0.90
FALSE_ALARM_TARGET = 0.05


@dataclass
class RunResult:
    """One training run and what every rule said about it."""

    fault: str
    faulty: bool
    seed: int
    onset: int | None
    steps: int
    verdicts: list[Verdict] = field(default_factory=list)
    progress: float | None = None  # healthy runs: worst quarter-to-quarter loss change

    def verdict(self, rule: str) -> Verdict:
        return next(v for v in self.verdicts if v.rule == rule)


@dataclass
class RuleScore:
    rule: str
    caught: int = 0
    faulty: int = 0
    alarms: int = 0
    healthy: int = 0
    latencies: list[int] = field(default_factory=list)
    alarm_runs: list[str] = field(default_factory=list)
    missed_runs: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        return self.caught / self.faulty if self.faulty else None

    @property
    def false_alarm_rate(self) -> float | None:
        return self.alarms / self.healthy if self.healthy else None


def score(results: list[RunResult], targets: dict[str, tuple[str, ...]]) -> list[RuleScore]:
    """Per rule: recall over the faulty runs of the faults it targets, false alarms over every
    healthy run it can see, latency = detection step - onset on caught runs."""
    scores = {r: RuleScore(r) for r in RULES}
    for res in results:
        tag = f"{res.fault}/seed{res.seed}"
        for v in res.verdicts:
            sc = scores[v.rule]
            if res.faulty and v.rule in targets[res.fault]:
                sc.faulty += 1
                if v.fired:
                    sc.caught += 1
                    if v.step is not None and res.onset is not None:
                        sc.latencies.append(v.step - res.onset)
                else:
                    sc.missed_runs.append(tag + (f" ({v.error})" if v.error else ""))
            elif not res.faulty and v.applicable:
                sc.healthy += 1
                if v.fired or v.error:
                    sc.alarms += 1
                    sc.alarm_runs.append(f"{tag}@{v.step}" if v.fired else f"{tag} error {v.error}")
    return [scores[r] for r in RULES]


def _pct(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f} %"


def rule_rows(scores: list[RuleScore]) -> list[list[str]]:
    rows = []
    for s in scores:
        lat = f"{statistics.median(s.latencies):g}" if s.latencies else "-"
        rows.append([s.rule, f"{s.caught}/{s.faulty}", _pct(s.recall), f"{s.alarms}/{s.healthy}",
                     _pct(s.false_alarm_rate), lat])
    return rows


RULE_HEADERS = ["rule", "caught", "recall", "false alarms", "FA rate", "median steps onset->detection"]


def overall(scores: list[RuleScore]) -> tuple[float, float, int, int, int, int]:
    caught = sum(s.caught for s in scores)
    faulty = sum(s.faulty for s in scores)
    alarms = sum(s.alarms for s in scores)
    healthy = sum(s.healthy for s in scores)
    return (caught / faulty if faulty else 0.0, alarms / healthy if healthy else 0.0,
            caught, faulty, alarms, healthy)


def verdict_line(scores: list[RuleScore]) -> str:
    recall, fa, caught, faulty, alarms, healthy = overall(scores)
    ok_r, ok_f = recall >= RECALL_TARGET, fa <= FALSE_ALARM_TARGET
    bad_r = [s.rule for s in scores if s.recall is not None and s.recall < RECALL_TARGET]
    bad_f = [s.rule for s in scores
             if s.false_alarm_rate is not None and s.false_alarm_rate > FALSE_ALARM_TARGET]
    return (
        f"overall: recall {caught}/{faulty} = {_pct(recall)} (target >= 90 %: "
        f"{'met' if ok_r else 'MISSED'}), false alarms {alarms}/{healthy} rule-runs = {_pct(fa, 1)} "
        f"(target <= 5 %: {'met' if ok_f else 'MISSED'}). Rules under the recall target: "
        f"{', '.join(bad_r) or 'none'}; over the false-alarm target: {', '.join(bad_f) or 'none'}. "
        "(Published research detectors: 68-94 % recall with 36-72 % false alarms.)"
    )


def progress_line(results: list[RunResult]) -> str:
    """Whether every healthy twin was still learning over its whole window."""
    twins = [r for r in results if not r.faulty and r.progress is not None]
    if not twins:
        return ""
    falling = sum(r.progress is not None and r.progress < 0 for r in twins)
    worst = max(twins, key=lambda r: r.progress or 0.0)
    what = "the smallest fall" if falling == len(twins) else "NOT LEARNING, the worst change"
    return (
        f"healthy twins: loss (validation, else training) lower in each quarter of the run than in "
        f"the quarter before on {falling}/{len(twins)}; {what}: {100 * (worst.progress or 0):+.0f} % "
        f"({worst.fault}/seed{worst.seed})"
    )


def matrix_rows(results: list[RunResult], faults: list[str]) -> list[list[str]]:
    """Per fault type and label: how many of its runs each rule fired on ('.' = none)."""
    rows = []
    for fault in faults:
        for faulty in (True, False):
            runs = [r for r in results if r.fault == fault and r.faulty == faulty]
            if not runs:
                continue
            cells = []
            for rule in RULES:
                n = sum(r.verdict(rule).fired for r in runs)
                app = sum(r.verdict(rule).applicable for r in runs)
                cells.append("n/a" if app == 0 else ("." if n == 0 else f"{n}/{len(runs)}"))
            rows.append([f"{fault} {'FAULT' if faulty else 'healthy'}", *cells])
    return rows


_SHORT = {"Overfit": "OF", "Overtraining": "OT"}


def short(rule: str) -> str:
    """A column label: the rule's capitals (ExplodingTensor -> ET)."""
    return _SHORT.get(rule) or "".join(c for c in rule if c.isupper())


def overrides_text() -> str:
    if not OVERRIDES:
        return "every rule ran with AWS's default parameters"
    return "; ".join(f"{r}: {p} ({why})" for r, (p, why) in OVERRIDES.items())
