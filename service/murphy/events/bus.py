"""``EventBus``: subscriptions, delivery and the event stream over the job store's outbox.

Events are written by the store, in the same transaction as the status change that caused them
(``JobStore.set_event_builder``); the bus only reads the outbox. ``wake()`` (called by the store
after a commit that appended events) makes every worker and every ``wait_for_events`` look at
once; without it they still look every ``event_poll_interval_s`` (events written by another
process on the same database). A housekeeping thread re-reads the subscription list (another
process may have created or deleted one) and applies the outbox and dead-letter retention.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import secrets
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

from murphy.events.dispatcher import CallbackWorker, SubscriptionWorker, Target, make_target
from murphy.events.patterns import matches, validate_pattern
from murphy.events.sealing import check_key, is_sealed, seal
from murphy.events.targets import check_url
from murphy.exceptions import (
    StoreError,
    SubscriptionExists,
    SubscriptionNotFound,
    ValidationException,
)
from murphy.settings import Settings
from murphy.store.base import DeadLetter, JobStore, Subscription

__all__ = ["DeadLetter", "EventBus", "Subscription"]

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_WEBHOOK_KEYS = {"type", "url", "secret"}
_EVENTBRIDGE_KEYS = {"type", "endpoint_url", "region", "event_bus_name"}
#: How long close() waits for workers in total (one may be inside a delivery attempt).
_CLOSE_WAIT_S = 2.0


class EventBus:
    def __init__(self, store: JobStore, settings: Settings, clock: Callable[[], float] = time.time,
                 *, target_factory: Callable[[dict[str, Any], Settings], Target] = make_target) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self._factory = target_factory
        self._lock = threading.Lock()
        self._workers: dict[str, SubscriptionWorker] = {}
        self._callbacks = CallbackWorker(store, settings)
        self._started = False
        self._closed = False
        self._cond = threading.Condition()
        self._generation = 0
        self._stop_housekeeping = threading.Event()
        self._housekeeper = threading.Thread(target=self._housekeeping, name="murphy-events-housekeeping",
                                             daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start a worker per stored subscription and the in-process callback worker."""
        with self._lock:
            if self._started or self._closed:
                return
            check_key(self.settings)
            self._started = True
            for sub in self.store.list_subscriptions():
                self._start_worker(self._sealed(sub))
            self._callbacks.start()
            self._housekeeper.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers.values())
            self._workers.clear()
            started = self._started
        for w in workers:
            w.stop()
        self._callbacks.stop()
        self._stop_housekeeping.set()
        deadline = time.monotonic() + _CLOSE_WAIT_S
        if started:
            for thread in [*workers, self._callbacks]:
                thread.join(max(0.0, deadline - time.monotonic()))
            self._housekeeper.join(max(0.0, deadline - time.monotonic()))
        self.wake()

    def wake(self) -> None:
        """New outbox rows: deliver now. Cheap; safe from any thread, also after close()."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            w.wake()
        self._callbacks.wake()

    def _with_sealed_secret(self, sub: Subscription) -> Subscription:
        """``sub`` as the store keeps it: a plain-text secret sealed (others unchanged)."""
        secret = sub.target.get("secret")
        if not isinstance(secret, str) or is_sealed(secret):
            return sub
        return dataclasses.replace(sub, target={**sub.target, "secret": seal(secret, self.settings)})

    def _sealed(self, sub: Subscription) -> Subscription:
        """``sub`` with a plain-text secret (stored before sealing existed) sealed, in the store
        too; a failure leaves it as it was (plain text still delivers)."""
        sealed = self._with_sealed_secret(sub)
        if sealed is sub:
            return sub
        try:
            self.store.set_subscription_target(sub.id, sealed.target)
        except StoreError as e:  # includes SubscriptionNotFound: deleted meanwhile
            log.warning("cannot seal the secret of subscription %s: %s", sub.name, e)
            return sub
        log.info("sealed the plain-text webhook secret of subscription %s", sub.name)
        return sealed

    def _start_worker(self, sub: Subscription) -> None:
        if sub.id in self._workers:  # start() and create_subscription() may both see it
            return
        worker = SubscriptionWorker(self.store, sub, self.settings, self.clock, self._factory)
        self._workers[sub.id] = worker
        worker.start()

    # --- subscriptions --------------------------------------------------------------------------

    def create_subscription(self, name: str, pattern: dict[str, Any], target: dict[str, Any], *,
                            start_seq: int | None = None, account: str | None = None) -> Subscription:
        """A new subscription, delivering from the outbox's current end (``start_seq``: after
        that seq instead; 0 replays everything). ``account``: its owner, who gets only that
        account's events (kept in the target as ``account``). Raises :class:`ValidationException`."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValidationException(
                "Subscription name must be 1 to 64 characters of letters, digits, '.', '_' or '-'")
        checked = validate_pattern(pattern)
        clean = self._check_target(target)
        if start_seq is not None and (isinstance(start_seq, bool) or not isinstance(start_seq, int)
                                      or start_seq < 0):
            raise ValidationException("start_seq must be a non-negative integer")
        if account is not None:
            clean["account"] = account
        sub = Subscription(f"sub-{uuid.uuid4().hex[:20]}", name, checked, clean, self.clock())
        stored = self._with_sealed_secret(sub)
        try:
            self.store.create_subscription(stored, start_seq)
        except SubscriptionExists:
            raise ValidationException(f"A subscription named {name} already exists") from None
        with self._lock:
            if self._started and not self._closed:
                self._start_worker(stored)
        return sub  # with the secret in clear: the creation response shows it once

    def list_subscriptions(self) -> list[Subscription]:
        return self.store.list_subscriptions()

    def get_subscription(self, id_or_name: str) -> Subscription:
        try:
            return self.store.get_subscription(id_or_name)
        except SubscriptionNotFound:
            raise ValidationException(f"Subscription {id_or_name} does not exist") from None

    def delete_subscription(self, id_or_name: str) -> None:
        sub = self.get_subscription(id_or_name)
        # The row goes first: a subscription sync that starts a worker after this sees no
        # subscription, and a worker it started just before is popped here.
        try:
            self.store.delete_subscription(sub.id)
        except SubscriptionNotFound:
            raise ValidationException(f"Subscription {id_or_name} does not exist") from None
        with self._lock:
            worker = self._workers.pop(sub.id, None)
        if worker is not None:
            worker.stop()  # it may be inside an attempt; it exits when that returns

    def sync_subscriptions(self) -> None:
        """Deliver for subscriptions another process created; stop those it deleted."""
        subs = {s.id: s for s in self.store.list_subscriptions()}
        with self._lock:
            if not self._started or self._closed:
                return
            gone = [w for sid, w in self._workers.items() if sid not in subs]
            for w in gone:
                del self._workers[w.sub.id]
            for sid, sub in subs.items():
                if sid not in self._workers:
                    # A worker started for a row deleted meanwhile ends at its first read.
                    self._start_worker(sub)
        for w in gone:
            w.stop()

    # --- retention ------------------------------------------------------------------------------

    def prune(self, now: float | None = None) -> tuple[int, int]:
        """Apply the outbox and dead-letter retention; returns (events, dead letters) deleted."""
        now = self.clock() if now is None else now
        s = self.settings
        events = letters = 0
        if s.event_retention_s > 0:
            cursors = {sub.name: sub.id for sub in self.store.list_subscriptions()}
            behind_at = {}
            for name, sid in cursors.items():
                with contextlib.suppress(SubscriptionNotFound):
                    behind_at[name] = self.store.get_cursor(sid)
            events, cut = self.store.prune_events(now - s.event_retention_s)
            behind = sorted(name for name, cursor in behind_at.items() if cursor < cut)
            if behind:
                log.warning("events up to seq %d were older than the %.0f s retention and were deleted "
                            "before subscription(s) %s delivered them", cut, s.event_retention_s,
                            ", ".join(behind))
        if s.dead_letter_retention_s > 0:
            letters = self.store.prune_dead_letters(now - s.dead_letter_retention_s)
        if events or letters:
            log.info("retention: deleted %d event(s) and %d dead letter(s)", events, letters)
        return events, letters

    def _housekeeping(self) -> None:
        next_prune = 0.0
        while not self._stop_housekeeping.wait(self.settings.event_subscription_sync_s):
            try:
                self.sync_subscriptions()
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + self.settings.event_prune_interval_s
                    self.prune()
            except StoreError as e:
                log.warning("event housekeeping: store unavailable: %s", e)
            except Exception:  # a bug here must not end subscription syncing for good
                log.exception("event housekeeping failed")

    # --- dead letters ---------------------------------------------------------------------------

    def dead_letters(self, subscription: str | None = None) -> list[DeadLetter]:
        sub_id = None if subscription is None else self.get_subscription(subscription).id
        return self.store.list_dead_letters(sub_id)

    def redrive(self, subscription: str, seqs: list[int] | None = None) -> int:
        """Queue the subscription's dead letters (all, or those at ``seqs``) for redelivery with
        their original event ids; returns how many were queued."""
        sub = self.get_subscription(subscription)
        count = self.store.redrive_dead_letters(sub.id, seqs)
        with self._lock:
            worker = self._workers.get(sub.id)
        if worker is not None:
            worker.redrive()
        return count

    # --- reading the outbox ---------------------------------------------------------------------

    def events_after(self, seq: int, pattern: dict[str, Any] | None = None,
                     limit: int = 100) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` outbox events after ``seq`` that match ``pattern`` (None: all)."""
        if pattern is None:
            return self.store.events_after(seq, limit)
        checked = validate_pattern(pattern)
        out: list[tuple[int, dict[str, Any]]] = []
        cursor = seq
        while len(out) < limit:
            batch = self.store.events_after(cursor, max(limit, 100))
            for s, event in batch:
                cursor = s
                if matches(checked, event):
                    out.append((s, event))
                    if len(out) == limit:
                        break
            if len(batch) < max(limit, 100):
                break
        return out

    def last_event_seq(self) -> int:
        """The outbox's highest seq (0 when empty)."""
        return self.store.last_event_seq()

    def wait_for_events(self, after_seq: int, timeout: float) -> bool:
        """Block (call from a worker thread) until an event with seq > ``after_seq`` exists or
        ``timeout`` seconds passed; returns whether one exists."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                generation = self._generation
            if self.store.last_event_seq() > after_seq:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._cond:
                if self._generation == generation:
                    self._cond.wait(min(remaining, self.settings.event_poll_interval_s))

    # --- in-process callbacks -------------------------------------------------------------------

    def on(self, pattern: dict[str, Any] | None,
           callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every event from now on that matches ``pattern`` (None:
        all), in order, at least once, on the bus's callback thread. Returns an unsubscribe
        function."""
        checked = None if pattern is None else validate_pattern(pattern)
        return self._callbacks.add(checked, callback)

    # --- validation -----------------------------------------------------------------------------

    def _check_target(self, target: Any) -> dict[str, Any]:
        if not isinstance(target, dict):
            raise ValidationException("target must be an object with a type: webhook or eventbridge")
        kind = target.get("type")
        if kind == "webhook":
            _only(target, _WEBHOOK_KEYS)
            url = _http_url(target.get("url"), "target.url")
            secret = target.get("secret")
            if secret is None:
                secret = secrets.token_urlsafe(32)
            elif not isinstance(secret, str) or not 1 <= len(secret) <= 256:
                raise ValidationException("target.secret must be a string of 1 to 256 characters")
            check_url("target.url", url, self.settings)  # the policy last: the shape's errors first
            return {"type": "webhook", "url": url, "secret": secret}
        if kind == "eventbridge":
            _only(target, _EVENTBRIDGE_KEYS)
            endpoint = target.get("endpoint_url")
            region = target.get("region") or self.settings.default_region
            bus = target.get("event_bus_name") or "default"
            if not isinstance(region, str) or not re.fullmatch(r"[a-z0-9-]{1,32}", region):
                raise ValidationException(f"target.region is not a region name: {region!r}")
            if not isinstance(bus, str) or not re.fullmatch(r"[A-Za-z0-9/._:-]{1,1600}", bus):
                raise ValidationException(f"target.event_bus_name is not a bus name or ARN: {bus!r}")
            if endpoint is not None:
                check_url("target.endpoint_url", _http_url(endpoint, "target.endpoint_url"), self.settings)
            return {"type": "eventbridge",
                    "endpoint_url": None if endpoint is None else _http_url(endpoint, "target.endpoint_url"),
                    "region": region, "event_bus_name": bus}
        raise ValidationException(
            f"Unknown target type {kind!r}: use \"webhook\" (with url) or \"eventbridge\"")


def _only(target: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(target) - allowed)
    if unknown:
        raise ValidationException(
            f"Unknown target field(s) {', '.join(unknown)}; a {target['type']} target takes "
            f"{', '.join(sorted(allowed))}")


def _http_url(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationException(f"{field} is required: an http:// or https:// URL")
    try:
        parts = urllib.parse.urlsplit(value)
        port = parts.port
    except ValueError as e:
        raise ValidationException(f"{field} is not a valid URL: {value} ({e})") from None
    if parts.scheme not in ("http", "https"):
        raise ValidationException(f"{field} must be an http:// or https:// URL, not {value!r}")
    if not parts.hostname or any(c.isspace() for c in value) or (port is not None and port == 0):
        raise ValidationException(f"{field} is not a valid URL (no host or a bad port): {value!r}")
    return value
