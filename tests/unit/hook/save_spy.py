"""A spy on the PyTorch hook's full save path, for tests of its replayed decisions."""

from __future__ import annotations

import pytest


class FullPathSaves:
    """Every call of the PyTorch hook's full save path (``Hook._save_torch``), as (step, name),
    while :attr:`recording`: what a replayed decision skips."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []
        self.recording = True

    def named(self, prefix: str) -> list[tuple[int, str]]:
        return [(step, name) for step, name in self.calls if name.startswith(prefix)]


def spy_full_path(monkeypatch: pytest.MonkeyPatch) -> FullPathSaves:
    """Record every ``Hook._save_torch`` call until ``monkeypatch`` is undone."""
    from murphy.hook.torch import Hook

    saves = FullPathSaves()
    original = Hook._save_torch

    def counted(self: Hook, name: str, value: object) -> None:
        if saves.recording:
            saves.calls.append((self.step, name))
        original(self, name, value)

    monkeypatch.setattr(Hook, "_save_torch", counted)
    return saves
