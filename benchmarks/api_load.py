"""API load: murphy's server vs moto's server, 50 concurrent boto3 clients, one run.

Both servers run as their own processes on 127.0.0.1 and get the same jobs (created through
boto3). Then, per operation (DescribeTrainingJob, ListTrainingJobs with MaxResults=10) and per
server, ``--clients`` threads, each with its own stock boto3 client, call back to back for
``--seconds``; the table gives throughput and p50/p99 latency as the clients see them.

murphy runs as ``murphy server`` does (uvicorn + create_app + the supervisor loop) with the fake
runtime (nothing is executed); all jobs but ``--active`` (default 10) are stopped before the runs,
as in a real store where most jobs have finished (moto's jobs are Completed at once), so the
supervisor reconciles ``--active`` jobs every 0.1 s while the clients call. The store is SQLite
(the default) or in-memory (``--store memory``).

Besides what the clients see, murphy's own ``/metrics`` histogram gives the handler time per
describe (body read → response built; bucket upper bound for p99; time queued in the event loop
before the handler runs is not in it): the server's own share of the latency, which on a 2-core
machine is small next to the 50 clients' botocore work.

Closed-loop clients: by Little's law latency = clients / throughput, so the 50-client p99 is
bounded below by 50 / throughput and mostly measures how fast the whole box (server and the
clients' own botocore work, sharing the CPUs) turns requests around. ``--paced RATE`` adds a run
where the same clients together send RATE requests/s, which shows the latency of a server that is
not saturated.

``--auth`` adds a third server, murphy with ``--auth sigv4`` (same jobs, its own store), and
compares its describe/list throughput with murphy's without verification (issue 18: >= 90 %).

usage: python benchmarks/api_load.py [--jobs 200] [--clients 50] [--seconds 5] [--store sqlite|memory]
                                     [--paced 200] [--procs 1] [--no-supervisor] [--auth]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, machine, table  # noqa: E402

REGION = "us-west-2"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
#: endpoint -> (access key id, secret) for servers that verify signatures (set before forking).
CREDENTIALS: dict[str, tuple[str, str]] = {}
KEY_FILE = "bench-key.json"


def serve_murphy(port: int, store_url: str, data_dir: str, supervisor: bool, auth: bool = False) -> None:
    """The server process (``--serve-murphy``)."""
    import uvicorn

    from murphy.api.app import create_app
    from murphy.jobs.service import JobService
    from murphy.jobs.supervisor import Supervisor
    from murphy.runtimes.fake import FakeRuntime
    from murphy.settings import Settings
    from murphy.store import open_job_store

    settings = Settings(data_dir=Path(data_dir), runtime="fake", port=port, auth="sigv4" if auth else "none")
    store = open_job_store(store_url)
    if auth:
        from murphy.auth.keys import KeyRing

        key = KeyRing(store, settings).create("123456789012", "bench")  # type: ignore[arg-type]
        (Path(data_dir) / KEY_FILE).write_text(json.dumps(key))
    runtime = FakeRuntime(exit_on_stop=True)
    service = JobService(store, runtime, settings)
    sup = Supervisor(store, runtime, settings)
    if supervisor:
        service.on_change = sup.wake
        sup.start()
    try:
        uvicorn.run(create_app(service, settings), host="127.0.0.1", port=port, log_level="warning", access_log=False)
    finally:
        sup.close()
        store.close()


_OPS = {"describe": "SageMaker.DescribeTrainingJob", "list": "SageMaker.ListTrainingJobs"}


def server_histogram(url: str, op: str) -> dict[float, float]:
    """Cumulative bucket counts of murphy's latency histogram for one operation."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    buckets: dict[float, float] = {}
    prefix = "murphy_api_request_duration_seconds_bucket{"
    for line in text.splitlines():
        if line.startswith(prefix) and f'operation="{_OPS[op]}"' in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return buckets


def histogram_p99_ms(before: dict[float, float], after: dict[float, float]) -> float:
    """Upper bound of the bucket holding the 99th percentile of the requests between two scrapes."""
    delta = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = delta.get(float("inf"), 0.0)
    for le, count in delta.items():
        if total and count >= 0.99 * total:
            return le * 1000
    return float("inf")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client(url: str) -> Any:
    import boto3

    akid, secret = CREDENTIALS.get(url, ("test", "test"))
    return boto3.session.Session().client("sagemaker", endpoint_url=url, region_name=REGION,
                                          aws_access_key_id=akid, aws_secret_access_key=secret)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    sm = client(url)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server at {url} exited with {proc.returncode}")
        try:
            sm.list_training_jobs(MaxResults=1)
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"server at {url} not ready after {timeout}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # uvicorn and moto's werkzeug both stop on SIGINT
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def job_request(name: str) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "murphy/linear-regression-demo:latest", "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://bench/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "HyperParameters": {"lr": "0.001", "scale": "1", "steps": "10", "debug_frequency": "1"},
        "DebugHookConfig": {"S3OutputPath": "s3://bench/out", "CollectionConfigurations": []},
        "DebugRuleConfigurations": [{
            "RuleConfigurationName": "ExplodingTensor",
            "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest",
            "RuleParameters": {"rule_to_invoke": "ExplodingTensor"},
        }],
    }


def _clients(url: str, op: str, names: list[str], first: int, count: int, total: int, seconds: float,
             rate: float | None, ready: Any, go: Any, out: Any) -> None:
    """One load process: ``count`` client threads (global indexes ``first``...), each with its own
    boto3 client, calling ``op`` for ``seconds`` after ``go`` (closed loop, or paced so that all
    ``total`` clients together send ``rate`` requests/s)."""
    sms = [client(url) for _ in range(count)]
    for sm in sms:  # open each client's connection before the clock starts
        sm.describe_training_job(TrainingJobName=names[0])
    latencies: list[list[float]] = [[] for _ in range(count)]
    errors = [0] * count
    interval = total / rate if rate else 0.0

    def run(j: int) -> None:
        sm, mine, k = sms[j], latencies[j], first + j
        t_end = time.perf_counter() + seconds
        next_at = time.perf_counter() + interval * k / total
        while True:
            if interval:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                next_at += interval
            t0 = time.perf_counter()
            if t0 >= t_end:
                return
            try:
                if op == "describe":
                    sm.describe_training_job(TrainingJobName=names[k % len(names)])
                else:
                    sm.list_training_jobs(MaxResults=10)
                mine.append(time.perf_counter() - t0)
            except Exception:
                errors[j] += 1
            k += total

    threads = [threading.Thread(target=run, args=(j,)) for j in range(count)]
    ready.put(count)
    go.wait()
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out.put({"lat": [x for per in latencies for x in per], "errors": sum(errors),
             "elapsed": time.perf_counter() - started})


def load(url: str, op: str, names: list[str], clients: int, seconds: float, rate: float | None,
         procs: int) -> dict[str, Any]:
    """``clients`` boto3 clients spread over ``procs`` processes (so the clients' own botocore
    work is not capped by one interpreter's GIL)."""
    ctx = mp.get_context("fork")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    workers = []
    first = 0
    for n in shares:
        w = ctx.Process(target=_clients, args=(url, op, names, first, n, clients, seconds, rate, ready, go, out))
        w.start()
        workers.append(w)
        first += n
    for _ in workers:
        ready.get(timeout=120)
    go.set()
    parts = [out.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join()
    lat = sorted(x for p in parts for x in p["lat"])
    errors = sum(p["errors"] for p in parts)
    if not lat:
        sys.exit(f"{op} on {url}: no successful call ({errors} errors)")
    elapsed = max(p["elapsed"] for p in parts)
    return {
        "requests": len(lat), "errors": errors, "rps": len(lat) / elapsed,
        "p50_ms": lat[len(lat) // 2] * 1000, "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--active", type=int, default=10, help="jobs left InProgress on murphy (the rest are stopped)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    ap.add_argument("--paced", type=float, default=0.0, help="also run at this total request rate (req/s)")
    ap.add_argument("--no-supervisor", action="store_true", help="run murphy's API without its supervisor loop")
    ap.add_argument("--procs", type=int, default=1,
                    help="client processes the clients are spread over (use more on machines with spare cores)")
    ap.add_argument("--auth", action="store_true", help="also run murphy with --auth sigv4 and compare")
    ap.add_argument("--auth-rounds", type=int, default=3, help="alternating sigv4/none runs per operation")
    ap.add_argument("--serve-murphy", nargs=5, metavar=("PORT", "STORE_URL", "DATA_DIR", "SUPERVISOR", "AUTH"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_murphy:
        port, url, data, sup, auth = args.serve_murphy
        serve_murphy(int(port), url, data, sup == "1", auth == "1")
        return

    tmp = tempfile.mkdtemp(prefix="murphy-api-load-")
    store_url = "memory://" if args.store == "memory" else f"sqlite:///{tmp}/murphy.db"
    m_port, t_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "service")}
    logs = [open(Path(tmp) / f"{n}.log", "wb") for n in ("murphy", "moto")]  # noqa: SIM115
    sup_flag = "0" if args.no_supervisor else "1"
    murphy = subprocess.Popen(
        [sys.executable, __file__, "--serve-murphy", str(m_port), store_url, tmp, sup_flag, "0"],
        stdout=logs[0], stderr=subprocess.STDOUT, env=env, start_new_session=True)
    signed: subprocess.Popen[bytes] | None = None
    if args.auth:
        a_port, a_dir = free_port(), Path(tmp) / "sigv4"
        a_dir.mkdir()
        a_store = "memory://" if args.store == "memory" else f"sqlite:///{a_dir}/murphy.db"
        logs.append(open(Path(tmp) / "murphy-sigv4.log", "wb"))  # noqa: SIM115
        signed = subprocess.Popen(
            [sys.executable, __file__, "--serve-murphy", str(a_port), a_store, str(a_dir), sup_flag, "1"],
            stdout=logs[-1], stderr=subprocess.STDOUT, env=env, start_new_session=True)
    moto_bin = Path(sys.executable).parent / "moto_server"
    moto = subprocess.Popen([str(moto_bin), "-H", "127.0.0.1", "-p", str(t_port)],
                            stdout=logs[1], stderr=subprocess.STDOUT, start_new_session=True)
    servers = {"murphy": f"http://127.0.0.1:{m_port}", "moto": f"http://127.0.0.1:{t_port}"}
    procs = {"murphy": murphy, "moto": moto}
    if signed is not None:
        servers["murphy-sigv4"] = f"http://127.0.0.1:{a_port}"
        procs["murphy-sigv4"] = signed
    murphys = [n for n in servers if n.startswith("murphy")]
    try:
        if signed is not None:
            deadline = time.monotonic() + 60
            while not (a_dir / KEY_FILE).exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            made = json.loads((a_dir / KEY_FILE).read_text())["AccessKey"]
            CREDENTIALS[servers["murphy-sigv4"]] = (made["AccessKeyId"], made["SecretAccessKey"])
        for name, url in servers.items():
            wait_ready(url, procs[name])
        names = [f"bench-{i:04d}" for i in range(args.jobs)]
        for url in servers.values():
            sm = client(url)
            for n in names:
                sm.create_training_job(**job_request(n))
        for mname in murphys:
            sm = client(servers[mname])
            for n in names[args.active:]:
                sm.stop_training_job(TrainingJobName=n)
            for n in names[args.active:] if not args.no_supervisor else ():  # nothing stops them without it
                while sm.describe_training_job(TrainingJobName=n)["TrainingJobStatus"] != "Stopped":
                    time.sleep(0.05)
        with urllib.request.urlopen(servers["murphy"] + "/healthz", timeout=5) as r:
            assert json.loads(r.read())["status"] == "ok"
        results: dict[str, dict[str, Any]] = {}
        runs = [("describe", None), ("list", None)] + ([("describe", args.paced)] if args.paced else [])
        for op, rate in runs:
            for name, url in servers.items():
                key = f"{op}{'@' + str(int(rate)) if rate else ''}/{name}"
                before = server_histogram(url, op) if name == "murphy" else None
                if name == "murphy-sigv4":
                    continue  # measured below, alternating with murphy without auth
                results[key] = load(url, op, names, args.clients, args.seconds, rate, args.procs)
                if before is not None:
                    results[key]["server_p99_ms"] = histogram_p99_ms(before, server_histogram(url, op))
                print(f"  {key}: {results[key]}", file=sys.stderr, flush=True)
        # On a shared machine one run can be slowed by anything; sigv4 and none alternate for
        # --auth-rounds rounds per operation and the medians are compared.
        auth_runs: dict[str, list[float]] = {}
        for op in ("describe", "list") if args.auth else ():
            for r in range(args.auth_rounds):
                for name in ("murphy-sigv4", "murphy") if r % 2 else ("murphy", "murphy-sigv4"):
                    cpu0 = cpu_seconds(procs[name].pid)
                    got = load(servers[name], op, names, args.clients, args.seconds, None, args.procs)
                    cpu = (cpu_seconds(procs[name].pid) - cpu0) / got["requests"] * 1e6
                    auth_runs.setdefault(f"{op}/{name}", []).append(got["rps"])
                    auth_runs.setdefault(f"{op}/{name}/cpu", []).append(cpu)
                    if got["errors"]:
                        sys.exit(f"{op} on {name}: {got['errors']} errors")
                    print(f"  {op}/{name} round {r}: {got['rps']:.0f} req/s, {cpu:.0f} us CPU/request",
                          file=sys.stderr, flush=True)
    finally:
        for proc in procs.values():
            stop(proc)
        for f in logs:
            f.close()

    print(f"\nAPI load: {args.clients} concurrent boto3 clients (threads in {args.procs} process(es)), "
          f"{args.seconds:g} s per run, "
          f"{args.jobs} jobs, murphy store {args.store}{'' if not args.no_supervisor else ', no supervisor'}")
    print(machine())
    rows = []
    for op, rate in runs:
        label = f"{op}{f' (paced {rate:g} req/s)' if rate else ''}"
        m = results[f"{op}{'@' + str(int(rate)) if rate else ''}/murphy"]
        t = results[f"{op}{'@' + str(int(rate)) if rate else ''}/moto"]
        rows.append([label, f"{m['rps']:.0f}", f"{t['rps']:.0f}", f"{m['rps'] / t['rps']:.2f}x",
                     f"{m['p50_ms']:.1f}", f"{t['p50_ms']:.1f}", f"{m['p99_ms']:.1f}", f"{t['p99_ms']:.1f}",
                     f"<= {m['server_p99_ms']:g}", f"{m['errors']}/{t['errors']}"])
    print(table(["operation", "murphy req/s", "moto req/s", "ratio", "murphy p50 ms", "moto p50 ms",
                 "murphy p99 ms", "moto p99 ms", "murphy handler p99 ms", "errors m/t"], rows))
    d = results["describe/murphy"]
    verdicts = [
        ("describe p99 <= 20 ms in murphy's handler (excludes queueing)", d["server_p99_ms"] <= 20.0,
         f"<= {d['server_p99_ms']:g} ms"),
        ("describe p99 <= 20 ms (closed loop)", d["p99_ms"] <= 20.0, f"{d['p99_ms']:.1f} ms"),
        ("murphy describe throughput >= moto", d["rps"] >= results["describe/moto"]["rps"],
         f"{d['rps']:.0f} vs {results['describe/moto']['rps']:.0f} req/s"),
        ("murphy list throughput >= moto", results["list/murphy"]["rps"] >= results["list/moto"]["rps"],
         f"{results['list/murphy']['rps']:.0f} vs {results['list/moto']['rps']:.0f} req/s"),
    ]
    if args.auth:
        import statistics

        auth_rows, ratios, capacity = [], {}, {}
        med = statistics.median
        for op in ("describe", "list"):
            on, off = auth_runs[f"{op}/murphy-sigv4"], auth_runs[f"{op}/murphy"]
            cpu_on, cpu_off = med(auth_runs[f"{op}/murphy-sigv4/cpu"]), med(auth_runs[f"{op}/murphy/cpu"])
            ratios[op], capacity[op] = med(on) / med(off), cpu_off / cpu_on
            auth_rows.append([op, f"{med(on):.0f}", f"{med(off):.0f}", f"{ratios[op]:.2f}",
                              f"{cpu_on:.0f}", f"{cpu_off:.0f}", f"{capacity[op]:.2f}",
                              " ".join(f"{x:.0f}" for x in on), " ".join(f"{x:.0f}" for x in off)])
        print(f"\nSigV4 verification (--auth sigv4) vs none: medians of {args.auth_rounds} alternating runs; "
              "server CPU per request from /proc (what bounds a saturated server's throughput)")
        print(table(["operation", "sigv4 req/s", "none req/s", "ratio", "sigv4 CPU us/req", "none CPU us/req",
                     "capacity ratio", "sigv4 runs", "none runs"], auth_rows))
        from _asgi_cost import describe_cost_us

        # The app alone, in this process, alternating: the verification's own share of a describe.
        costs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(3):
            for auth in (False, True):
                costs[auth].append(describe_cost_us(auth, n=3000, rounds=3))
        app_off, app_on = min(costs[False]), min(costs[True])
        print(f"in-process ASGI describe (best of 3x3 alternating runs): none {app_off:.0f} us, "
              f"sigv4 {app_on:.0f} us, ratio {app_off / app_on:.2f}")
        verdicts.append(("in-process describe with SigV4 >= 90 % of the throughput without", app_off / app_on >= 0.9,
                         f"{app_off / app_on:.0%}"))
        verdicts.append(("describe server capacity with SigV4 >= 90 % of without (CPU per request)",
                         capacity["describe"] >= 0.9, f"{capacity['describe']:.0%}"))
        ratio = ratios["describe"]
        verdicts.append(("describe throughput with SigV4 >= 90 % of without", ratio >= 0.9, f"{ratio:.0%}"))
    if args.paced:
        p = results[f"describe@{int(args.paced)}/murphy"]
        verdicts.append((f"describe p99 <= 20 ms at {args.paced:g} req/s", p["p99_ms"] <= 20.0, f"{p['p99_ms']:.1f} ms"))
    print()
    for what, ok, detail in verdicts:
        print(f"{'PASS' if ok else 'MISS'}  {what}: {detail}")
    print(json.dumps({"results": results, "clients": args.clients, "seconds": args.seconds, "store": args.store}))


if __name__ == "__main__":
    main()
