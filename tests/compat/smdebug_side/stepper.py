"""Write with the REAL smdebug PyTorch hook one step at a time, and read with smdebug's own
trial, on command (smdebug venv only). Lets a test interleave writes and reads exactly.

usage: python stepper.py   (JSON commands on stdin, one per line; answers on stdout as a line
"@@" + JSON, since smdebug logs to stdout too)

  {"op": "hook", "out": DIR_OR_S3, "save_shape": false, "save_raw": true, "save_interval": 1}
  {"op": "step", "mode": "TRAIN"}   one training step; smdebug publishes the *previous* step's
                                    index file when this step starts (forward pre-hook)
  {"op": "close"}                   hook.close(): the last step's index and the end marker
  {"op": "open", "path": P, "kwargs": {...}}   smdebug.trials.create_trial(P, **kwargs)
  {"op": "probe", "name": NAME, "args": {...}} reader_probe.PROBES[NAME](trial, api, **args)
"""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import reader_probe
import smdebug.pytorch as smd
import torch
from smdebug.analysis.utils import no_refresh, refresh
from smdebug.core.modes import ModeKeys
from smdebug.rules import invoke_rule
from smdebug.rules.rule import Rule
from smdebug.trials import create_trial
from torch import nn

API = reader_probe.Api(modes=ModeKeys, no_refresh=no_refresh, refresh=refresh, Rule=Rule, invoke_rule=invoke_rule)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.fc(x))


class Session:
    def __init__(self) -> None:
        self.hook = None
        self.trial = None
        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.model = Net()
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.gen = torch.Generator().manual_seed(7)

    def hook_op(self, out: str, save_shape: bool = False, save_raw: bool = True, save_interval: int = 1) -> str:
        self.hook = smd.Hook(
            out_dir=out,
            save_config=smd.SaveConfig(save_interval=save_interval),
            reduction_config=smd.ReductionConfig(save_raw_tensor=save_raw, save_shape=save_shape),
            include_collections=["losses", "weights"],
            include_regex=["relu_output"],
        )
        self.hook.register_module(self.model)
        self.hook.register_loss(self.loss_fn)
        return out

    def step(self, mode: str = "TRAIN") -> int:
        self.hook.set_mode(getattr(smd.modes, mode))
        x = torch.randn(5, 4, generator=self.gen)
        y = torch.randint(0, 3, (5,), generator=self.gen)
        loss = self.loss_fn(self.model(x), y)
        # Custom tensors named like smdebug's labels() helper expects (in an existing
        # collection: smdebug 1.0.34 crashes on a new one, it has no reduction config).
        self.hook.save_tensor("labels_10", y.float(), "losses")
        self.hook.save_tensor("labels_2", y.float() * 2, "losses")
        if mode == "TRAIN":
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return int(self.hook.step)

    def handle(self, cmd: dict) -> object:
        op = cmd["op"]
        if op == "hook":
            return self.hook_op(
                cmd["out"], cmd.get("save_shape", False), cmd.get("save_raw", True), cmd.get("save_interval", 1)
            )
        if op == "step":
            return self.step(cmd.get("mode", "TRAIN"))
        if op == "close":
            self.hook.close()
            return True
        if op == "open":
            self.trial = create_trial(cmd["path"], **cmd.get("kwargs", {}))
            return {"name": self.trial.name, "path": self.trial.path}
        if op == "probe":
            return reader_probe.PROBES[cmd["name"]](self.trial, API, **cmd.get("args", {}))
        raise ValueError(f"unknown op {op!r}")


def main() -> None:
    session = Session()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = {"ok": True, "result": session.handle(json.loads(line))}
        except Exception as e:
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        sys.stdout.write("@@" + json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
