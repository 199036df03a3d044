"""A training script written for SageMaker's Pipe input mode (as its docs and PipeModeDataset
read a channel): epoch N of channel ``train`` is the FIFO /opt/ml/input/data/train_N, read to EOF."""

import hashlib
import json
import os

DATA = "/opt/ml/input/data"
epochs = []
for n in (0, 1):
    with open(os.path.join(DATA, f"train_{n}"), "rb") as f:
        epochs.append(hashlib.sha256(f.read()).hexdigest())
with open("/opt/ml/input/config/inputdataconfig.json") as f:
    config = json.load(f)
with open(os.path.join(os.environ["SM_CHANNEL_FILES"], "f.txt")) as f:
    files = f.read()
print("PIPE " + json.dumps({"epochs": epochs, "config": config, "files": files}), flush=True)
