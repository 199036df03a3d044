"""The in-memory store's event side: outbox, subscriptions with cursors, dead letters.

Same contract as :mod:`murphy.store.sql_events`; events are kept as JSON text so no caller
shares mutable state with the store.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from murphy.exceptions import SubscriptionExists, SubscriptionNotFound
from murphy.store.base import DeadLetter, Subscription


@dataclass
class _Letter:
    letter: DeadLetter
    event: str
    redrive: bool = False


class MemoryEvents:
    """Mixin of :class:`murphy.store.memory.InMemoryJobStore`: its event methods."""

    def __init__(self) -> None:
        # Taken after the store's record lock when appending (never the other way round).
        self._elock = threading.Lock()
        # (seq, created_at, body), seqs contiguous; pruning keeps the newest row, so the last
        # row's seq is always the highest ever given.
        self._outbox: list[tuple[int, float, str]] = []
        self._subs: dict[str, tuple[Subscription, str, str]] = {}  # id -> (sub, pattern, target)
        self._cursors: dict[str, int] = {}
        self._letters: dict[tuple[str, int], _Letter] = {}

    def _append(self, events: list[dict[str, Any]], job_name: str) -> int:
        """Append to the outbox (the caller holds the record lock); the last seq, 0 if none."""
        del job_name  # only the SQL store indexes it
        now = time.time()
        with self._elock:
            for ev in events:
                seq = (self._outbox[-1][0] if self._outbox else 0) + 1
                self._outbox.append((seq, now, json.dumps(ev, separators=(",", ":"))))
            return self._outbox[-1][0] if events else 0

    def events_after(self, seq: int, limit: int = 100) -> list[tuple[int, dict[str, Any]]]:
        with self._elock:
            # seqs have no gaps here and pruning removes a prefix: seq s is at s - first.
            first = self._outbox[0][0] if self._outbox else 1
            start = max(0, seq + 1 - first)
            rows = self._outbox[start: start + max(0, limit)]
        return [(s, json.loads(body)) for s, _, body in rows]

    def last_event_seq(self) -> int:
        with self._elock:
            return self._outbox[-1][0] if self._outbox else 0

    def prune_events(self, before: float) -> tuple[int, int]:
        with self._elock:
            n = 0
            while n < len(self._outbox) - 1 and self._outbox[n][1] < before:
                n += 1
            cut = self._outbox[n - 1][0] if n else 0
            del self._outbox[:n]
        return n, cut

    # --- subscriptions --------------------------------------------------------------------------

    def create_subscription(self, sub: Subscription, cursor: int | None = None) -> None:
        pattern, target = json.dumps(sub.pattern), json.dumps(sub.target)
        with self._elock:
            if sub.id in self._subs or any(s.name == sub.name for s, _, _ in self._subs.values()):
                raise SubscriptionExists(sub.name)
            self._subs[sub.id] = (sub, pattern, target)
            end = self._outbox[-1][0] if self._outbox else 0
            self._cursors[sub.id] = end if cursor is None else cursor

    def _copy(self, entry: tuple[Subscription, str, str]) -> Subscription:
        sub, pattern, target = entry
        return replace(sub, pattern=json.loads(pattern), target=json.loads(target))

    def list_subscriptions(self) -> list[Subscription]:
        with self._elock:
            entries = list(self._subs.values())
        return sorted((self._copy(e) for e in entries), key=lambda s: (s.created_at, s.id))

    def get_subscription(self, id_or_name: str) -> Subscription:
        with self._elock:
            entry = self._subs.get(id_or_name) or next(
                (e for e in self._subs.values() if e[0].name == id_or_name), None)
        if entry is None:
            raise SubscriptionNotFound(id_or_name)
        return self._copy(entry)

    def delete_subscription(self, subscription_id: str) -> None:
        with self._elock:
            if self._subs.pop(subscription_id, None) is None:
                raise SubscriptionNotFound(subscription_id)
            del self._cursors[subscription_id]
            for key in [k for k in self._letters if k[0] == subscription_id]:
                del self._letters[key]

    def set_subscription_target(self, subscription_id: str, target: dict[str, Any]) -> None:
        with self._elock:
            entry = self._subs.get(subscription_id)
            if entry is None:
                raise SubscriptionNotFound(subscription_id)
            self._subs[subscription_id] = (entry[0], entry[1], json.dumps(target))

    def get_cursor(self, subscription_id: str) -> int:
        with self._elock:
            if subscription_id not in self._cursors:
                raise SubscriptionNotFound(subscription_id)
            return self._cursors[subscription_id]

    def set_cursor(self, subscription_id: str, seq: int) -> None:
        with self._elock:
            if subscription_id not in self._cursors:
                raise SubscriptionNotFound(subscription_id)
            self._cursors[subscription_id] = max(self._cursors[subscription_id], seq)

    # --- dead letters ---------------------------------------------------------------------------

    def add_dead_letter(self, letter: DeadLetter) -> None:
        with self._elock:
            self._letters[(letter.subscription_id, letter.seq)] = _Letter(letter, json.dumps(letter.event))

    def list_dead_letters(self, subscription_id: str | None = None, *,
                          redriving: bool = False) -> list[DeadLetter]:
        with self._elock:
            found = [(k, v) for k, v in self._letters.items()
                     if v.redrive == redriving and subscription_id in (None, k[0])]
        return [replace(v.letter, event=json.loads(v.event)) for _, v in sorted(found, key=lambda kv: kv[0])]

    def redrive_dead_letters(self, subscription_id: str, seqs: list[int] | None = None) -> int:
        wanted = None if seqs is None else set(seqs)
        count = 0
        with self._elock:
            for (sid, seq), v in self._letters.items():
                if sid == subscription_id and not v.redrive and (wanted is None or seq in wanted):
                    v.redrive = True
                    count += 1
        return count

    def remove_dead_letter(self, subscription_id: str, seq: int) -> None:
        with self._elock:
            self._letters.pop((subscription_id, seq), None)

    def prune_dead_letters(self, before: float) -> int:
        with self._elock:
            old = [k for k, v in self._letters.items() if v.letter.failed_at < before and not v.redrive]
            for key in old:
                del self._letters[key]
        return len(old)
