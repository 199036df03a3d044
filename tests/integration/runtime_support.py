"""What the process and Docker runtime tests share: the images, a training script, a tarball."""

from __future__ import annotations

import io
import tarfile

DEMO = "murphy/linear-regression-demo:latest"
PYTORCH = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.1.0-cpu-py310"
RULES = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"

TRAIN_PY = r'''
import argparse, json, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--mode")
p.add_argument("--epochs", type=int)
args = p.parse_args()
print("argv " + json.dumps(sys.argv[1:]), flush=True)
if args.mode == "ok":
    train = os.environ["SM_CHANNEL_TRAIN"]
    files = sorted(os.path.relpath(os.path.join(d, f), train) for d, _, fs in os.walk(train) for f in fs)
    seen = {"files": files, "one": os.listdir(os.environ["SM_CHANNEL_ONE"]), "cwd": os.getcwd(),
            "job": os.environ["TRAINING_JOB_NAME"], "epochs": os.environ["SM_HP_EPOCHS"],
            "hook": os.environ.get("SMDEBUG_CONFIG_FILE_PATH")}
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "seen.json"), "w").write(json.dumps(seen))
    open(os.path.join(os.environ["SM_MODEL_DIR"], "model.bin"), "wb").write(b"weights")
elif args.mode == "fail":
    open("/".join([os.environ["SM_OUTPUT_DIR"], "failure"]), "w").write("ValueError: learning rate too high")
    sys.exit(3)
elif args.mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
elif args.mode == "sleep":
    print("ready", flush=True)
    time.sleep(float(os.environ.get("SLEEP_S", "30")))
    print("done", flush=True)
elif args.mode == "probe":
    import socket
    facts = {"uid": os.getuid(), "gid": os.getgid(), "nets": sorted(os.listdir("/sys/class/net")), "cwd": os.getcwd(),
             "hook": os.environ.get("SMDEBUG_CONFIG_FILE_PATH"), "cpus": os.environ.get("SM_NUM_CPUS")}
    for line in open("/proc/self/status"):
        if line.startswith(("CapEff", "NoNewPrivs")):
            k, v = line.split(":", 1)
            facts[k] = v.strip()
    try:
        open("/etc/murphy-probe", "w").write("x")
        facts["root_writable"] = True
    except OSError:
        facts["root_writable"] = False
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=2).close()
        facts["internet"] = True
    except OSError:
        facts["internet"] = False
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "probe.json"), "w").write(json.dumps(facts))
elif args.mode == "oom":
    print("ready", flush=True)
    hog = []
    while True:
        hog.append(bytearray(64 << 20))
'''


def tarball(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
