"""``make bench``: train, start and load the project's server and a stock-Rasa baseline.

Both are measured in the same run on the same machine, so the ratios hold
even on a noisy shared machine. The baseline is the configuration ``rasa
init`` gives (bench/baseline/config.yml: DIET, TED, UnexpecTED, in-memory
stores) trained on this project's domain and data. Load comes from
``bot.bench.loadgen`` in its own process on loopback.
"""
from __future__ import annotations

import json
import os
import platform
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import requests

from bot import paths
from bot.bench.loadgen import conversation, load_questions
from bot.local_services import NginxServer, PostgresServer, RedisServer, free_port
from bot.server import Service, actions_service, python, rasa_service

Log = Callable[[str], None]

#: The scenarios of the issue: one visitor; 50 back to back; 150 every 2-4 s.
SCENARIOS = {
    "single": ["--mode", "burst", "--visitors", "1", "--conversations", "20", "--duration", "90"],
    "burst50": ["--mode", "burst", "--visitors", "50", "--duration", "30"],
    "steady150": ["--mode", "steady", "--visitors", "150", "--duration", "60"],
}


@dataclass
class Variant:
    """One server set-up to measure."""

    name: str
    label: str
    config: Path
    credentials: Path
    servers: int = 1  # more than one: each its own process, behind nginx
    balance: str = "conversation"  # nginx: "conversation" (deploy/'s hash) or "round-robin"
    # "project" (SQLite tracker store), "memory" (stock), "scaled" (PostgreSQL + Redis),
    # "shared" (one SQLite file for all the processes + Redis)
    stores: str = "project"
    results: Dict[str, object] = field(default_factory=dict)


def rss_mb(pid: int) -> List[float]:
    """Resident memory (MB) of a process and of each of its children (Sanic workers)."""
    pids = [pid]
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids += [int(p) for p in out]
    except OSError:
        pass
    sizes = []
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    sizes.append(int(line.split()[1]) / 1024)
        except OSError:
            continue
    return sizes


def train(variant: Variant, out_dir: Path, log: Log) -> Path:
    """``rasa train`` from scratch with empty caches; returns the model and records the time."""
    cache = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    env = {**os.environ, "RASA_CACHE_DIRECTORY": str(cache / "rasa"), "BOT_CACHE_DIR": str(cache / "bot")}
    command = [python(), "-m", "rasa", "train", "--config", str(variant.config), "--domain", "domain",
               "--data", "data/nlu", "data/rules", "--out", str(out_dir), "--fixed-model-name", variant.name]
    log(f"  training {variant.label} (empty caches) ...")
    start = time.perf_counter()
    result = subprocess.run(command, cwd=paths.project_dir(), env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(cache, ignore_errors=True)
    if result.returncode != 0:
        raise RuntimeError(f"training {variant.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    variant.results["train_s"] = round(seconds, 1)
    log(f"  trained in {seconds:.0f} s")
    return out_dir / f"{variant.name}.tar.gz"


def cached_train(variant: Variant, out_dir: Path, log: Log, reuse: bool) -> Path:
    """The baseline takes many minutes to train: kept in var/bench/ for the same config and data.

    Its training time is then the one measured when it was trained (noted in
    the report); ``--retrain-baseline`` measures it again.
    """
    from bot.training import data_fingerprint

    inputs = ("domain", "data/nlu", "data/rules", str(variant.config.relative_to(paths.project_dir())))
    key = data_fingerprint(inputs=inputs)
    store = paths.var_dir() / "bench"
    model, record = store / f"{variant.name}-{key}.tar.gz", store / f"{variant.name}-{key}.json"
    if reuse and model.exists() and record.exists():
        saved = json.loads(record.read_text())
        variant.results["train_s"] = saved["train_s"]
        variant.results["train_measured"] = saved["measured"]
        log(f"  reusing {model.name} (trained in {saved['train_s']} s on {saved['measured']})")
        return model
    trained = train(variant, out_dir, log)
    store.mkdir(parents=True, exist_ok=True)
    shutil.copy(trained, model)
    measured = time.strftime("%Y-%m-%d", time.gmtime())
    record.write_text(json.dumps({"train_s": variant.results["train_s"], "measured": measured}))
    variant.results["train_measured"] = measured
    return model


def loadgen(url: str, scenario: str, log: Log) -> Dict[str, object]:
    command = [python(), "-m", "bot.bench.loadgen", "--url", url, *SCENARIOS[scenario]]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"load generator failed: {result.stderr[-2000:]}")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    log(f"    {scenario}: {summary['messages']} messages, {summary['per_second']}/s, "
        f"p50 {summary['p50_ms']} ms, p95 {summary['p95_ms']} ms, p99 {summary['p99_ms']} ms, "
        f"errors {summary['errors']}")
    return summary


def warm_up(url: str, servers: int = 1, conversations: int = 3) -> None:
    """A few conversations per server first, so that lazy start-up work is not counted as latency.

    Their messages come from the same development set as the measured ones,
    in other conversations (another seed), for every server and both variants.
    """
    rng, questions = random.Random(99), load_questions()
    for n in range(conversations * servers):
        for text in conversation(rng, questions):
            requests.post(f"{url}/webhooks/rest/webhook", json={"sender": f"warm-{n}", "message": text}, timeout=60)


def endpoints_for(variant: Variant, work: Path, action_port: int, infra: Dict[str, object]) -> Path:
    import yaml

    config: Dict[str, object] = {"action_endpoint": {"url": f"http://127.0.0.1:{action_port}/webhook"}}
    if variant.stores == "project":
        config["tracker_store"] = {"type": "bot.storage.tracker_store.RedactingTrackerStore",
                                   "db_url": f"sqlite:///{work / 'bench.db'}"}
    elif variant.stores in ("scaled", "shared"):
        db_url = infra["postgres"].url if variant.stores == "scaled" else f"sqlite:///{work / 'shared.db'}"
        config["tracker_store"] = {"type": "bot.storage.tracker_store.RedactingTrackerStore", "db_url": db_url}
        config["lock_store"] = {"type": "bot.storage.lock_store.ResilientRedisLockStore", "url": "127.0.0.1", "port": infra["redis"].port, "db": 0}
    path = work / f"endpoints-{variant.name}.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _server(variant: Variant, model: Path, endpoints: Path, port: int, index: int) -> Service:
    # The load generator's visitors write back to back, faster than a person
    # types: the per-conversation rate limit would answer them with 429s.
    env = {"BOT_RATE_PER_SENDER": "off"}
    if variant.stores == "memory":  # stock Rasa: its own REST channel, no API
        command = [python(), "-m", "rasa", "run", "--model", str(model), "--endpoints", str(endpoints),
                   "--credentials", str(variant.credentials), "--port", str(port), "--interface", "127.0.0.1"]
        return Service(f"{variant.name}-{index}", command, f"http://127.0.0.1:{port}/webhooks/rest/", env=env)
    return rasa_service(model, port=port, endpoints=str(endpoints), credentials=str(variant.credentials),
                        env=env, name=f"{variant.name}-{index}")


def measure(variant: Variant, model: Path, work: Path, action_port: int, infra: Dict[str, object], log: Log,
            scenarios: Optional[List[str]] = None) -> None:
    """Starts the variant's servers and runs the scenarios (default: all) against them."""
    endpoints = endpoints_for(variant, work, action_port, infra)
    ports = [free_port() for _ in range(variant.servers)]
    servers = [_server(variant, model, endpoints, port, i) for i, port in enumerate(ports)]
    nginx = None
    log(f"  starting {variant.label} ...")
    try:
        # One after another, as a rolling start does: each process's own load
        # time (started together, they would share the two cores).
        loads = []
        for server in servers:
            start = time.perf_counter()
            server.start(work).wait_ready(300)
            loads.append(round(time.perf_counter() - start, 1))
        variant.results["load_s"] = max(loads)
        variant.results["load_each_s"] = loads
        url = f"http://127.0.0.1:{ports[0]}"
        if len(servers) > 1:
            nginx = NginxServer(ports, balance=variant.balance).start()
            url = f"http://127.0.0.1:{nginx.port}"
        warm_up(url, len(servers))
        variant.results["rss_idle_mb"] = [round(m) for s in servers for m in rss_mb(s.process.pid)]
        for scenario in scenarios or list(SCENARIOS):
            variant.results[scenario] = loadgen(url, scenario, log)
        variant.results["rss_mb"] = [round(m) for s in servers for m in rss_mb(s.process.pid)]
    finally:
        if nginx:
            nginx.remove()
        for server in servers:
            server.stop()


def project_variants() -> List[Variant]:
    root = paths.project_dir()
    bench = root / "bench" / "baseline"
    return [
        Variant("baseline", "stock Rasa (rasa init config)", bench / "config.yml", bench / "credentials.yml",
                stores="memory"),
        Variant("project", "this bot, 1 process", root / "config.yml", root / "credentials.yml"),
        Variant("project2", "this bot, 2 processes behind nginx (PostgreSQL + Redis)", root / "config.yml",
                root / "credentials.yml", servers=2, stores="scaled"),
        # Each process waits for its database and Redis part of the time: a
        # third process on two cores keeps them busy meanwhile.
        Variant("project3", "this bot, 3 processes behind nginx (one SQLite file + Redis)", root / "config.yml",
                root / "credentials.yml", servers=3, stores="shared"),
    ]


def run_benchmark(log: Log = print, only: Optional[List[str]] = None, reuse_baseline: bool = True) -> Dict[str, Variant]:
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    variants = [v for v in project_variants() if not only or v.name in only]
    infra: Dict[str, object] = {}
    actions = actions_service(port=free_port())
    try:
        if any(v.stores == "scaled" for v in variants):
            infra["postgres"] = PostgresServer(durable=True).start()  # as deployed: every commit on disk
        if any(v.stores in ("scaled", "shared") for v in variants):
            infra["redis"] = RedisServer().start()
        actions.start(work).wait_ready()
        models: Dict[str, Path] = {}
        for variant in variants:
            key = variant.config
            if key not in models:
                if variant.name == "baseline":
                    models[key] = cached_train(variant, work / "models", log, reuse_baseline)
                else:
                    models[key] = train(variant, work / "models", log)
            else:
                variant.results["train_s"] = next(v.results["train_s"] for v in variants if v.config == key)
            log(f"{variant.label}:")
            measure(variant, models[key], work, action_port(actions), infra, log)
        baseline = next((v for v in variants if v.name == "baseline"), None)
        if baseline is not None and len(variants) > 1:
            # A shared machine drifts over a run: the baseline's throughput is
            # measured again after the others, and the ratio is to the mean of both.
            log(f"{baseline.label}, the 50-visitor burst again:")
            again = Variant(baseline.name, baseline.label, baseline.config, baseline.credentials, stores=baseline.stores)
            measure(again, models[baseline.config], work, action_port(actions), infra, log, ["burst50"])
            baseline.results["burst50_again"] = again.results["burst50"]
    finally:
        actions.stop()
        for part in infra.values():
            part.remove()
        shutil.rmtree(work, ignore_errors=True)
    return {v.name: v for v in variants}


def action_port(actions: Service) -> int:
    return int(actions.health_url.split(":")[2].split("/")[0])


def baseline_burst(base: Variant) -> Optional[float]:
    """The baseline's 50-visitor throughput: the mean of its two measures when there are two."""
    values = [(base.results.get(k) or {}).get("per_second") for k in ("burst50", "burst50_again")]
    values = [v for v in values if v]
    return round(sum(values) / len(values), 1) if values else None


def report(variants: Dict[str, Variant]) -> str:
    """A Markdown table: each variant's figures and its ratio to the baseline."""
    base = variants.get("baseline")

    def figure(v: Variant, key: str, sub: Optional[str] = None) -> Optional[float]:
        value = v.results.get(key)
        if sub is not None:
            value = (value or {}).get(sub) if isinstance(value, dict) else None
        if isinstance(value, list):
            value = max(value) if value else None
        return value

    rows = [
        ("Model load per process (start until ready), s", "load_s", None, "lower"),
        ("Memory per process after load test (RSS), MB", "rss_mb", None, "lower"),
        ("Training from scratch, s", "train_s", None, "lower"),
        ("1 visitor: p50 per message, ms", "single", "p50_ms", "lower"),
        ("1 visitor: p95 per message, ms", "single", "p95_ms", "lower"),
        ("50 visitors back to back: messages/s", "burst50", "per_second", "higher"),
        ("50 visitors back to back: p50, ms", "burst50", "p50_ms", "lower"),
        ("150 visitors every 2-4 s: p50, ms", "steady150", "p50_ms", "lower"),
        ("150 visitors every 2-4 s: p95, ms", "steady150", "p95_ms", "lower"),
        ("150 visitors every 2-4 s: p99, ms", "steady150", "p99_ms", "lower"),
        ("Errors (all scenarios)", None, None, "lower"),
    ]
    names = [n for n in ("baseline", "project", "project2", "project3") if n in variants]
    header = "| Measure | " + " | ".join(variants[n].label for n in names) + " |"
    lines = [header, "|" + "---|" * (len(names) + 1)]
    for title, key, sub, better in rows:
        cells = []
        for name in names:
            v = variants[name]
            if key is None:
                value = sum(int((v.results.get(s) or {}).get("errors", 0))
                            for s in [*SCENARIOS, *(f"{k}_again" for k in SCENARIOS)])
            else:
                value = figure(v, key, sub)
            cell = "n/a" if value is None else f"{value:g}" if isinstance(value, (int, float)) else str(value)
            if name == "baseline" and (key, sub) == ("burst50", "per_second") and v.results.get("burst50_again"):
                again = v.results["burst50_again"].get("per_second")
                cell = f"{value:g} then {again:g} (mean {baseline_burst(v):g})"
            if base is not None and name != "baseline" and key is not None and value:
                base_value = baseline_burst(base) if (key, sub) == ("burst50", "per_second") else figure(base, key, sub)
                if base_value:
                    ratio = value / base_value
                    cell += f" ({ratio:.2f}×)" if better == "higher" else f" ({ratio:.2f}× of baseline)"
            cells.append(cell)
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    cpus = os.cpu_count()
    try:
        mem = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
        mem_gb = int(mem.split()[1]) / 1024 / 1024
    except (OSError, StopIteration):
        mem_gb = 0
    return f"{platform.machine()}, {cpus} cores, {mem_gb:.0f} GiB, Python {platform.python_version()}"


def detector_ms() -> float:
    """Milliseconds the danger detector adds per message (best of 5 rounds over the dev-set texts)."""
    from bot.bench.loadgen import load_questions
    from bot.danger.detector import load_detector, time_per_message

    return round(time_per_message(load_detector(), load_questions()) * 1000, 3)


def write_markdown(variants: Dict[str, Variant], path: Path, training: Optional[Dict[str, float]] = None,
                   detector: Optional[float] = None) -> str:
    table = report(variants)
    if detector is not None:
        table += f"\n\nDanger detector: {detector:g} ms per message (dev-set texts, best of 5 rounds; floor ≤ 2 ms)."
    if training:
        from bot.bench.training import markdown

        table += "\n\n" + "\n".join(markdown(training))
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = f"""# Benchmarks

Written by `make bench` (`python -m bot bench`, code in `bot/bench/`) on {when},
{machine()}. The baseline and this bot are measured in the same run, so the
ratios in brackets hold even though the shared machine is noisy.

- **Baseline**: stock Rasa 3.6 with the configuration `rasa init` gives
  (`bench/baseline/config.yml`: DIET, ResponseSelector, TED, UnexpecTED;
  in-memory tracker and lock stores; Rasa's own REST channel), trained on this
  project's domain and data.
- **This bot**: `config.yml` and the project's channels and redacting SQL
  tracker store: one process with a SQLite file (what `make run` starts); the
  scale-out layout of `deploy/` on one machine: two Rasa processes behind
  nginx, sharing PostgreSQL (with every commit flushed to disk, as deployed)
  and the Redis lock store; and three processes behind nginx sharing one
  SQLite file (WAL, `synchronous=NORMAL`) and the Redis lock store. nginx
  balances as `deploy/nginx/bot.conf` does: a consistent hash of the
  X-Conversation-Id header the widget sends (and the load generator) keeps
  a conversation on one server. A third process keeps the two cores busy
  while the others wait for SQLite and Redis. The per-conversation rate limit
  is off for the benchmark (its visitors write faster than a person types).
- **Load**: `bot/bench/loadgen.py`, a separate asyncio process on loopback;
  conversations of 10 realistic messages (a greeting, eight messages from the
  development set, a thank-you), a new sender per conversation. *1 visitor*:
  20 conversations (200 messages) one message after another. *50 back to back*: 30 s, each
  visitor sends its next message as soon as the reply arrives. *150 every
  2-4 s*: 60 s, each visitor waits 2-4 s between messages. Before them, three
  conversations per server from another seed warm up what loads lazily; the
  processes start one after another and the load time is each one's own.
  The baseline's 50-visitor burst runs again after all the others (the shared
  machine drifts over a run) and the throughput ratios are to the mean of its
  two measures. Training is from
  scratch with empty caches. The baseline's model is kept in `var/bench/` for
  the same data, so a later run reuses it and its training time (the date it
  was measured is in the raw figures); `--retrain-baseline` trains it again.

{table}

Raw figures:

```json
{json.dumps({**{n: v.results for n, v in variants.items()}, "training": training or {}}, indent=1)}
```
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return table
