"""``FakeRuntime``: a :class:`~murphy.runtimes.base.Runtime` that runs nothing, for unit tests.

It records every plan launched and every stop; the test scripts what each container does::

    rt = FakeRuntime()
    h = rt.launch(plan)                                   # state: running
    rt.add_log(plan.container_name, "Step=0, Loss=1.0")
    rt.set_state(plan.container_name, ContainerState("exited", exit_code=0))
    rt.fail_launch("bad/image:1")                         # launch(...) raises for that image
                                                          # (or: rt.fail_images.add(image))
    rt.during_launch = lambda plan: gate.wait()           # runs inside launch, the container
                                                          # already created: block, or raise to
                                                          # fail a launch that left it behind
    rt.list_containers("job-1")                           # what exists, as a backend answers
    rt.forget(name)                                       # gone as if the engine never had it
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from murphy.exceptions import RuntimeBackendError
from murphy.runtimes.base import ContainerState, FoundContainer, Handle, LogEvent, LogPage, Plan


@dataclass
class _Container:
    plan: Plan
    handle: Handle
    state: ContainerState
    logs: list[LogEvent] = field(default_factory=list)
    removed: bool = False


class FakeRuntime:
    """In-memory containers whose state the test sets (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.time, *, exit_on_stop: bool = False,
                 name: str = "fake") -> None:
        self.name = name
        self.clock = clock
        #: When True, ``stop`` ends a running container at once (143 for SIGTERM, 137 forced).
        self.exit_on_stop = exit_on_stop
        #: Plans in the order they were first launched (a repeated launch is not added).
        self.launched: list[Plan] = []
        #: Every ``launch`` call, repeats included.
        self.launch_calls: list[Plan] = []
        #: The container name of every ``status`` call.
        self.status_calls: list[str] = []
        #: ``(container_name, force)`` for every ``stop`` call.
        self.stops: list[tuple[str, bool]] = []
        self.removed: list[str] = []
        #: Images whose launch raises :class:`RuntimeBackendError` (see also :meth:`fail_launch`).
        self.fail_images: set[str] = set()
        #: Called inside ``launch`` after the container exists, outside the fake's lock (a test
        #: blocks here to hold a launch in flight, or raises to fail it after the create).
        self.during_launch: Callable[[Plan], None] | None = None
        self._containers: dict[str, _Container] = {}
        self._fail: dict[str, str] = {}
        self._lock = threading.Lock()

    # ---- scripting -------------------------------------------------------------------------

    def fail_launch(self, image: str, message: str | None = None) -> None:
        """Make ``launch`` raise :class:`RuntimeBackendError` for plans using ``image``."""
        self.fail_images.add(image)
        if message is not None:
            self._fail[image] = message

    def set_state(self, container_name: str, state: ContainerState) -> None:
        with self._lock:
            self._get(container_name).state = state

    def forget(self, container_name: str) -> None:
        """The container vanishes as if the engine never had it (a later launch creates anew)."""
        with self._lock:
            self._containers.pop(container_name, None)

    def add_log(self, container_name: str, message: str, timestamp_ms: int | None = None) -> None:
        t = int(self.clock() * 1000) if timestamp_ms is None else timestamp_ms
        with self._lock:
            self._get(container_name).logs.append(LogEvent(t, message, t))

    def plan(self, container_name: str) -> Plan:
        with self._lock:
            return self._get(container_name).plan

    def state(self, container_name: str) -> ContainerState:
        with self._lock:
            return self._get(container_name).state

    def handle(self, container_name: str) -> Handle:
        with self._lock:
            return self._get(container_name).handle

    def names(self) -> list[str]:
        with self._lock:
            return [p.container_name for p in self.launched]

    def stop_calls(self, container_name: str) -> list[bool]:
        """The ``force`` flag of each stop of ``container_name``."""
        return [force for name, force in self.stops if name == container_name]

    def _get(self, name: str) -> _Container:
        try:
            return self._containers[name]
        except KeyError:
            raise KeyError(f"fake runtime: no container named {name!r}") from None

    # ---- Runtime ---------------------------------------------------------------------------

    def launch(self, plan: Plan) -> Handle:
        with self._lock:
            self.launch_calls.append(plan)
            if plan.image in self.fail_images:
                raise RuntimeBackendError(self._fail.get(plan.image, f"fake runtime: cannot launch image {plan.image!r}"))
            existing = self._containers.get(plan.container_name)
            if existing is not None:
                return existing.handle
            handle = Handle(runtime=self.name, id=plan.container_name,
                            data={"container_name": plan.container_name, "role": plan.role})
            state = ContainerState("running", started_at=self.clock())
            self._containers[plan.container_name] = _Container(plan, handle, state)
            self.launched.append(plan)
        if self.during_launch is not None:
            self.during_launch(plan)
        return handle

    def status(self, handle: Handle) -> ContainerState:
        with self._lock:
            self.status_calls.append(handle.id)
            c = self._containers.get(handle.id)
            if c is None:
                return ContainerState("missing", failure=f"fake runtime: no container {handle.id!r}")
            return c.state

    def stop(self, handle: Handle, *, force: bool = False) -> None:
        with self._lock:
            self.stops.append((handle.id, force))
            c = self._containers.get(handle.id)
            if c is None or not self.exit_on_stop or c.state.phase not in ("pending", "running"):
                return
            c.state = ContainerState("exited", exit_code=137 if force else 143, started_at=c.state.started_at,
                                     ended_at=self.clock(), stage=c.state.stage)

    def read_logs(self, handle: Handle, cursor: int = 0, limit: int = 10_000) -> LogPage:
        with self._lock:
            c = self._containers.get(handle.id)
            events = [] if c is None else c.logs[cursor:cursor + limit]
            return LogPage(list(events), cursor + len(events))

    def remove(self, handle: Handle) -> None:
        with self._lock:
            self.removed.append(handle.id)
            c = self._containers.get(handle.id)
            if c is not None:
                c.removed = True

    def list_containers(self, job_name: str | None = None) -> list[FoundContainer]:
        """Containers not removed and not ``missing``, as an engine lists them."""
        with self._lock:
            return [
                FoundContainer(c.handle, c.plan.job_name, c.plan.container_name, c.plan.role, c.state.phase)
                for c in self._containers.values()
                if not c.removed and c.state.phase != "missing" and job_name in (None, c.plan.job_name)
            ]
