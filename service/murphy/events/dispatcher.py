"""Delivery workers: one thread per subscription, one for in-process callbacks.

A subscription's worker reads the outbox from its cursor, in seq order, and delivers each event
its pattern matches, one at a time: that is what keeps delivery in order (per job and overall).
A failed attempt is retried after an exponential backoff with full jitter; after the last
attempt the event becomes a dead letter and the cursor moves on. The cursor is written at most
every ``CURSOR_SAVE_S`` while busy, soon after going idle, before every backoff wait and on
close, so a crash re-sends at most the last half second of events, with the same ids (at least
once). Because every subscription has its own thread and
every attempt has a bounded timeout, a receiver that hangs, fails or drops connections delays
only its own subscription; writers (the supervisor, the API) never wait for delivery.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from murphy.events.patterns import matches
from murphy.exceptions import StoreError, SubscriptionNotFound
from murphy.settings import Settings
from murphy.store.base import DeadLetter, JobStore, Subscription

log = logging.getLogger(__name__)

BATCH = 100
#: How often a busy worker writes its cursor (more often costs a write transaction per event
#: and subscriber; a crash re-sends at most this much, with the same ids).
CURSOR_SAVE_S = 0.5


class Target(Protocol):
    def deliver(self, seq: int, event: dict[str, Any]) -> None:
        """One attempt; raises on failure."""
        ...

    def close(self) -> None: ...


def owns(target: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether a subscription with ``target`` may see ``event``: its owner's account's events
    only (subscriptions from before accounts, without an owner, see every event)."""
    owner = target.get("account")
    return owner is None or event.get("account") == owner


def make_target(target: dict[str, Any], settings: Settings) -> Target:
    """The delivery adapter for a (validated) subscription target."""
    if target["type"] == "webhook":
        from murphy.events.sealing import unseal
        from murphy.events.targets import check_peer
        from murphy.events.webhook import WebhookTarget

        return WebhookTarget(target["url"], unseal(target["secret"], settings), settings.event_delivery_timeout_s,
                             check_peer=lambda url, peer: check_peer(url, peer, settings))
    from murphy.events.eventbridge import EventBridgeTarget
    from murphy.events.targets import check_url

    if target.get("endpoint_url"):  # again now: the name may resolve elsewhere than at creation
        check_url("target.endpoint_url", target["endpoint_url"], settings)
    return EventBridgeTarget(target, settings.event_delivery_timeout_s)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**(attempt - 1))] after failed ``attempt``."""
    ceiling = min(cap, base * 2 ** min(attempt - 1, 62))
    return (rng or random).uniform(0.0, ceiling)


class _Worker:
    """A thread with a stop flag and a wake-up event."""

    def __init__(self, name: str) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _sleep(self, seconds: float) -> bool:
        """Wait for a wake-up, at most ``seconds``; True when stopping."""
        self._wake.wait(seconds)
        return self._stop.is_set()

    def _run(self) -> None:
        raise NotImplementedError


class SubscriptionWorker(_Worker):
    def __init__(self, store: JobStore, sub: Subscription, settings: Settings,
                 clock: Callable[[], float] = time.time,
                 target_factory: Callable[[dict[str, Any], Settings], Target] = make_target) -> None:
        super().__init__(f"murphy-events-{sub.name}")
        self.sub = sub
        self._store = store
        self._settings = settings
        self._clock = clock
        self._factory = target_factory
        self._redrive_due = True
        self._cursor = 0
        self._saved = 0
        self._saved_at = 0.0

    def redrive(self) -> None:
        """Dead letters were queued for redelivery: handle them on the next pass."""
        self._redrive_due = True
        self.wake()

    def _run(self) -> None:
        target: Target | None = None
        target_error = ""
        try:
            self._cursor = self._saved = self._store.get_cursor(self.sub.id)
            while not self._stop.is_set():
                self._wake.clear()
                if target is None:
                    try:
                        target = self._factory(self.sub.target, self._settings)
                    except Exception as e:  # e.g. a secret sealed with another key: wait, retry
                        if str(e) != target_error:  # once per distinct cause, not every poll
                            log.error("subscription %s cannot deliver: %s", self.sub.name, e)
                            target_error = str(e)
                        if self._stop.wait(self._settings.event_retry_cap_s):
                            break
                        continue
                try:
                    busy = self._pass(target)
                except SubscriptionNotFound:
                    return  # deleted (maybe by another process)
                except StoreError as e:
                    log.warning("events for %s: store unavailable: %s", self.sub.name, e)
                    busy = False
                except Exception:  # a bug or a broken target: log, wait, try again
                    log.exception("event worker for subscription %s failed", self.sub.name)
                    busy = False
                if busy:
                    continue
                timeout = self._settings.event_poll_interval_s
                if self._cursor > self._saved:  # come back to save it when it is due
                    timeout = min(timeout, max(0.0, self._saved_at + CURSOR_SAVE_S - time.monotonic()))
                woken = self._wake.wait(timeout)
                if not woken and timeout == self._settings.event_poll_interval_s:
                    self._redrive_due = True  # a quiet poll: look for redrives from elsewhere
            self._save(force=True)
        except StoreError as e:  # includes SubscriptionNotFound: gone, or the store closed
            log.debug("event worker for %s ends: %s", self.sub.name, e)
        finally:
            if target is not None:
                target.close()

    def _pass(self, target: Target) -> bool:
        """Redrives, then one batch from the cursor; True if there may be more to do now."""
        if self._redrive_due:
            self._redrive_due = False
            for letter in self._store.list_dead_letters(self.sub.id, redriving=True):
                if self._stop.is_set():
                    return False
                delivered = self._deliver(target, letter.seq, letter.event)
                if delivered is None:
                    return False
                if delivered:  # (not delivered: it is a dead letter again, with a fresh count)
                    self._store.remove_dead_letter(self.sub.id, letter.seq)
        batch = self._store.events_after(self._cursor, BATCH)
        try:
            for seq, event in batch:
                if self._stop.is_set():
                    return False
                if (owns(self.sub.target, event) and matches(self.sub.pattern, event)
                        and self._deliver(target, seq, event) is None):
                    return False
                self._cursor = seq
        finally:
            self._save(force=self._stop.is_set())
        return len(batch) == BATCH

    def _save(self, force: bool) -> None:
        if self._cursor > self._saved and (force or time.monotonic() - self._saved_at >= CURSOR_SAVE_S):
            self._store.set_cursor(self.sub.id, self._cursor)
            self._saved = self._cursor
            self._saved_at = time.monotonic()

    def _deliver(self, target: Target, seq: int, event: dict[str, Any]) -> bool | None:
        """Attempts until delivered (True) or dead-lettered (False); None when stopped first."""
        s = self._settings
        attempt = 0
        while True:
            attempt += 1
            try:
                target.deliver(seq, event)
                return True
            except Exception as e:
                error = str(e) or type(e).__name__
            if self._stop.is_set():
                return None  # closing or deleted: the next worker (if any) tries again
            if attempt >= s.event_max_attempts:
                log.warning("event %s for %s: dead letter after %d attempts: %s",
                            seq, self.sub.name, attempt, error)
                self._store.add_dead_letter(
                    DeadLetter(self.sub.id, seq, event, attempt, error, self._clock()))
                return False
            self._save(force=True)  # what is done stays done while we wait
            if self._stop.wait(backoff_delay(attempt, s.event_retry_base_s, s.event_retry_cap_s)):
                return None


class _Callback:
    def __init__(self, pattern: dict[str, Any] | None, fn: Callable[[dict[str, Any]], None],
                 cursor: int) -> None:
        self.pattern = pattern
        self.fn = fn
        self.cursor = cursor
        self.active = True


class CallbackWorker(_Worker):
    """In-process callbacks (embedded use): each gets every matching event after the moment
    it was registered, in order, at least once (a callback that raises is retried with the
    subscriptions' backoff, then skipped for that event with the error logged)."""

    def __init__(self, store: JobStore, settings: Settings) -> None:
        super().__init__("murphy-events-callbacks")
        self._store = store
        self._settings = settings
        self._lock = threading.Lock()
        self._callbacks: list[_Callback] = []

    def add(self, pattern: dict[str, Any] | None, fn: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        entry = _Callback(pattern, fn, self._store.last_event_seq())
        with self._lock:
            self._callbacks.append(entry)

        def remove() -> None:
            entry.active = False
            with self._lock:
                if entry in self._callbacks:
                    self._callbacks.remove(entry)

        self.wake()
        return remove

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                busy = self._pass()
            except StoreError as e:
                log.warning("event callbacks: store unavailable: %s", e)
                busy = False
            except Exception:
                log.exception("event callback worker failed")
                busy = False
            if not busy and self._sleep(self._settings.event_poll_interval_s):
                break

    def _pass(self) -> bool:
        with self._lock:
            callbacks = list(self._callbacks)
        if not callbacks:
            return False
        start = min(c.cursor for c in callbacks)
        batch = self._store.events_after(start, BATCH)
        for seq, event in batch:
            for cb in callbacks:
                if not cb.active or seq <= cb.cursor:
                    continue
                wanted = cb.pattern is None or matches(cb.pattern, event)
                if wanted and not self._call(cb, event):
                    return False
                cb.cursor = seq
        return len(batch) == BATCH

    def _call(self, cb: _Callback, event: dict[str, Any]) -> bool:
        s = self._settings
        for attempt in range(1, s.event_max_attempts + 1):
            try:
                cb.fn(event)
                return True
            except Exception:
                if attempt == s.event_max_attempts:
                    log.exception("event callback %r failed %d times on event %s; skipped",
                                  cb.fn, attempt, event.get("id"))
                    return True
            if self._stop.wait(backoff_delay(attempt, s.event_retry_base_s, s.event_retry_cap_s)):
                return False
        return True
