"""A container entrypoint on the process runtime sees the job's own ``/opt/ml`` (a private mount
namespace; real processes, real mounts): as root, and as an unprivileged user."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from murphy.container import namespace
from murphy.container.env import OptMl
from murphy.container.toolkit import Toolkit

#: What SDK 3.x's sm_train.sh relies on: the config files, a writable /opt/ml, python3 and pip3 on PATH.
SCRIPT = ("cat /opt/ml/input/config/hyperparameters.json > /opt/ml/model/seen.json"
          " && command -v python3 > /opt/ml/model/python3 && command -v pip3 > /opt/ml/model/pip3"
          " && python3 -c 'import sys; print(sys.prefix)' > /opt/ml/model/prefix"
          " && pwd > /opt/ml/model/cwd && echo done > /opt/ml/output/data/x")
NOBODY = 65534


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def make(root: Path, **config: object) -> OptMl:
    opt_ml = OptMl(str(root / "c" / "opt" / "ml"))
    for d in opt_ml.layout():
        Path(d).mkdir(parents=True, exist_ok=True)
    Path(opt_ml.config_file("hyperparameters.json")).write_text(json.dumps({"lr": "100"}))
    Path(opt_ml.config_file("murphy.json")).write_text(json.dumps({"python": sys.executable, **config}))
    return opt_ml


def test_a_container_entrypoint_sees_the_jobs_opt_ml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host_had_opt_ml = os.path.exists("/opt/ml")
    opt_ml = make(tmp_path, container_entrypoint=["/bin/bash"], container_arguments=["-c", SCRIPT])
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    assert Toolkit(opt_ml).run() == 0, Path(opt_ml.failure_file).read_text() if os.path.exists(opt_ml.failure_file) else ""
    model = Path(opt_ml.model_dir)
    assert json.loads((model / "seen.json").read_text()) == {"lr": "100"}
    shims = Path(opt_ml.root).parent / "murphy-bin"
    assert (model / "python3").read_text().strip() == str(shims / "python3")
    assert (model / "pip3").read_text().strip() == str(shims / "pip3")
    assert (model / "prefix").read_text().strip() == sys.prefix  # the runtime's interpreter, venv and all
    assert (model / "cwd").read_text().strip() == opt_ml.code_dir
    assert Path(opt_ml.output_data_dir, "x").read_text() == "done\n"
    # Nothing was mounted or created on the host.
    assert os.path.exists("/opt/ml") == host_had_opt_ml


def _userns_allowed(python: str) -> bool:
    probe = [python, "-c", "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000 | 0x20000))"]
    return subprocess.run(probe, user=NOBODY if os.geteuid() == 0 else None).returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="mount namespaces are Linux's")
def test_an_unprivileged_user_gets_the_same_view() -> None:
    """A laptop user without root: a user namespace mapping only their own ids."""
    with tempfile.TemporaryDirectory(prefix="murphy-ns-") as where:  # pytest's tmp_path is root's only
        _unprivileged_view(Path(where))


def _unprivileged_view(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        user: int | None = NOBODY
    else:
        user = None
    # As root the test runs as nobody, who may not reach the service's interpreter (pyenv under
    # /root): the module is standard library only, so the system Python runs a copy of it.
    python = "/usr/bin/python3" if user is not None else sys.executable
    if not os.access(python, os.X_OK):
        pytest.skip(f"no {python} to run as an unprivileged user")
    if not _userns_allowed(python):
        pytest.skip("this kernel refuses unprivileged user namespaces (the reason murphy reports is tested below)")
    opt_ml = make(tmp_path)
    module = tmp_path / "namespace.py"
    module.write_text(Path(namespace.__file__).read_text())
    os.chmod(tmp_path, 0o755)
    if user is not None:
        for d, _, fs in os.walk(tmp_path):
            os.chown(d, user, user)
            for f in fs:
                os.chown(os.path.join(d, f), user, user)
    program = ["/bin/sh", "-c", "id -u > /opt/ml/model/uid && ls /opt/ml/input/config > /opt/ml/model/ls"]
    argv = [python, str(module), opt_ml.root, "--", *program]
    proc = subprocess.run(argv, user=user, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Still the user's own uid inside (no root in the namespace), and the job's files at /opt/ml.
    assert Path(opt_ml.model_dir, "uid").read_text().strip() == str(os.geteuid() if user is None else user)
    assert Path(opt_ml.model_dir, "ls").read_text().split() == ["hyperparameters.json", "murphy.json"]


def test_without_a_namespace_an_opt_ml_program_fails_with_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opt_ml = make(tmp_path)

    def refused(host_opt_ml: str) -> None:
        raise namespace.NamespaceError(1, "unshare(CLONE_NEWUSER | CLONE_NEWNS): Operation not permitted")

    monkeypatch.setattr(namespace, "enter", refused)
    assert namespace.main([opt_ml.root, "--", "/bin/bash", "-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"]) == 126
    failure = Path(opt_ml.failure_file).read_text()
    assert "Operation not permitted" in failure and "unprivileged_userns_clone" in failure and "Docker runtime" in failure
    assert failure in capsys.readouterr().err


def test_without_a_namespace_a_program_naming_no_opt_ml_still_runs(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"  # enter() fails on it
    proc = subprocess.run([sys.executable, "-m", "murphy.container.namespace", str(missing), "--", "echo", "ran"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "ran", proc.stdout + proc.stderr
    assert "no private /opt/ml" in proc.stdout


def test_in_a_container_the_entrypoint_runs_as_given() -> None:
    """Docker mounts the job's directory at /opt/ml itself: no namespace, no PATH change."""
    toolkit = Toolkit(OptMl("/opt/ml"))
    argv = ["/bin/bash", "-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"]
    assert toolkit._entrypoint(list(argv), "/opt/murphy/bin/python") == argv
    assert toolkit.program_env == {}


#: A script-mode program written for SageMaker: its hook's out_dir is a hard-coded /opt/ml path.
TRAIN_PY = """
import os, torch
from murphy.core import SaveConfig
from murphy.hook.torch import Hook
hook = Hook(out_dir="/opt/ml/output/tensors", save_config=SaveConfig(save_interval=1), include_collections=["weights"])
model = torch.nn.Linear(2, 1)
hook.register_module(model)
model(torch.ones(1, 2)).sum().backward()
hook.close()
open(os.path.join(os.environ["SM_MODEL_DIR"], "seen"), "w").write(
    os.environ["MURPHY_OPT_ML"] + "\\n" + str(os.path.isfile("/opt/ml/input/config/murphy.json")))
"""


def _script_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OptMl:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN_PY)
    opt_ml = make(tmp_path, kind="script-mode")
    Path(opt_ml.config_file("hyperparameters.json")).write_text(json.dumps(
        {"sagemaker_program": '"train.py"', "sagemaker_submit_directory": json.dumps(src.as_uri())}))
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    monkeypatch.setenv("MURPHY_OPT_ML", opt_ml.root)  # what the process runtime sets
    monkeypatch.setenv("SM_MODEL_DIR", opt_ml.model_dir)
    return opt_ml


def _events(opt_ml: OptMl) -> list[Path]:
    return sorted(Path(opt_ml.tensors_dir).rglob("*.tfevents"))


@pytest.mark.skipif(sys.platform != "linux", reason="mount namespaces are Linux's")
def test_a_script_mode_program_runs_in_the_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Script mode gets the same private /opt/ml as an entrypoint: the hard-coded out_dir is the
    job's own directory there, and the hook has nothing to rewrite (MURPHY_OPT_ML is /opt/ml)."""
    if os.geteuid() != 0 and not _userns_allowed(sys.executable):
        pytest.skip("no mount namespace here (the fallback is tested below)")
    host_had_opt_ml = os.path.exists("/opt/ml")
    monkeypatch.delenv("MURPHY_MOUNT_NAMESPACE", raising=False)
    opt_ml = _script_mode(tmp_path, monkeypatch)
    assert Toolkit(opt_ml).run() == 0, Path(opt_ml.failure_file).read_text() if os.path.exists(opt_ml.failure_file) else ""
    assert Path(opt_ml.model_dir, "seen").read_text().split() == ["/opt/ml", "True"]
    assert _events(opt_ml), list(Path(opt_ml.root).rglob("*"))
    assert os.path.exists("/opt/ml") == host_had_opt_ml


@pytest.mark.parametrize("off", ["off", "0"])
def test_without_the_namespace_script_mode_falls_back_to_the_hooks_rewrite(
    off: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MURPHY_MOUNT_NAMESPACE=off forces the fallback: the program runs as it is, MURPHY_OPT_ML
    names the job's directory, and the hook maps its /opt/ml/... out_dir there."""
    host_had_opt_ml = os.path.exists("/opt/ml")
    monkeypatch.setenv("MURPHY_MOUNT_NAMESPACE", off)
    opt_ml = _script_mode(tmp_path, monkeypatch)
    assert Toolkit(opt_ml).run() == 0, Path(opt_ml.failure_file).read_text() if os.path.exists(opt_ml.failure_file) else ""
    assert Path(opt_ml.model_dir, "seen").read_text().split() == [opt_ml.root, str(host_had_opt_ml and Path(
        "/opt/ml/input/config/murphy.json").is_file())]
    assert _events(opt_ml), list(Path(opt_ml.root).rglob("*"))
    assert os.path.exists("/opt/ml") == host_had_opt_ml


def test_with_the_namespace_off_an_entrypoint_naming_opt_ml_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opt_ml = make(tmp_path, container_entrypoint=["/bin/bash"], container_arguments=["-c", SCRIPT])
    monkeypatch.setenv("MURPHY_STAGE_FILE", str(tmp_path / "stage.json"))
    monkeypatch.setenv("MURPHY_MOUNT_NAMESPACE", "off")
    assert Toolkit(opt_ml).run() == 126
    failure = Path(opt_ml.failure_file).read_text()
    assert "turned off by MURPHY_MOUNT_NAMESPACE=off" in failure and "Unset MURPHY_MOUNT_NAMESPACE" in failure
