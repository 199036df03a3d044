"""``make up``'s start-up checks (infra/compose/lib.sh): a pid file written right after ``cmd &``
names a forked shell that has not yet exec'd ``cmd``. That process is starting, not dead: CI
once failed ``make up`` with "murphy exited during start-up" and an empty log for exactly that."""

from __future__ import annotations

import subprocess
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "infra" / "compose" / "lib.sh"

# A shell that becomes `sleep 30` only after 2 s (a fork that has not exec'd yet), and what
# live_pid and pid_starting say before the exec, after it, once it is killed, and for a PID that
# does not exist. The pattern comes from $N: the script's text is the fork's command line.
SCRIPT = r"""
source "$LIB"
( sleep 2; exec sleep "$N" ) &
echo $! >"$STATE/x.pid"
check() { live_pid "$STATE/x.pid" "sleep $N" >/dev/null && echo -n live || echo -n notlive
          pid_starting "$STATE/x.pid" && echo " starting" || echo " notstarting"; }
check
for _ in $(seq 1 100); do live_pid "$STATE/x.pid" "sleep $N" >/dev/null && break; sleep 0.1; done
check
kill "$(cat "$STATE/x.pid")"; wait 2>/dev/null || true
check
echo 999999999 >"$STATE/x.pid"
check
"""


def test_a_forked_shell_before_exec_counts_as_starting_and_a_dead_pid_does_not(tmp_path: Path) -> None:
    out = subprocess.run(["bash", "-c", SCRIPT], env={"LIB": str(LIB), "MURPHY_UP_DIR": str(tmp_path), "N": "30",
                                                       "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    assert out == ["notlive starting", "live starting", "notlive notstarting", "notlive notstarting"], out
