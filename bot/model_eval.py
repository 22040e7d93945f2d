"""Evaluating a model file in-process: the dev cases and the crisis test file, through the whole bot.

Same scoring as ``bot eval`` (which goes through a running server's REST
channel), but the model is loaded here with a throw-away in-memory tracker
store, so candidate models can be checked before anyone talks to them.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import subprocess
import sys
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from bot import paths
from bot.evaluate import Outcome, Report, load_cases, read_turn, score

logger = logging.getLogger(__name__)


def crisis_file_cases(path: Path) -> List[Dict[str, Any]]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    cases = [
        {"id": f"crisis-{i}", "text": c["text"], "expect": "crisis", "category": c.get("category"), "lang": c.get("lang", "en")}
        for i, c in enumerate(raw.get("crisis", []))
    ]
    cases += [
        {"id": f"no-crisis-{i}", "text": c["text"], "expect": "no_crisis", "lang": c.get("lang", "en")}
        for i, c in enumerate(raw.get("no_crisis", []))
    ]
    return cases


async def _run(model: Path, cases: List[Dict[str, Any]]) -> List[Outcome]:
    import bot.channels  # noqa: F401  (installs the replies for a missing action server)
    from rasa.core.agent import load_agent
    from rasa.core.channels.channel import CollectingOutputChannel, UserMessage
    from rasa.core.tracker_store import InMemoryTrackerStore
    from rasa.core.utils import AvailableEndpoints

    logging.getLogger("bot.resilience").setLevel(logging.CRITICAL)  # no action server here, by design
    agent = await load_agent(model_path=str(model), endpoints=AvailableEndpoints())
    agent.tracker_store = InMemoryTrackerStore(agent.domain)
    agent.processor.tracker_store = agent.tracker_store
    outcomes = []
    for case in cases:
        collector = CollectingOutputChannel()
        await agent.handle_message(UserMessage(case["text"], collector, f"eval-{uuid.uuid4().hex}"))
        outcomes.append(read_turn(case, collector.messages))
    return outcomes


def file_hash(*files: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:12]


def evaluate_model(model: Path, dev_cases: Path, crisis_cases: Path) -> Dict[str, Any]:
    """Scores a model on the dev cases and the crisis file; cached next to the model."""
    cache = Path(str(model).replace(".tar.gz", ".eval.json"))
    key = file_hash(dev_cases, crisis_cases)
    if cache.exists():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached.get("cases_hash") == key:
            return cached
    dev = load_cases(dev_cases)
    crisis = crisis_file_cases(crisis_cases)
    outcomes = asyncio.run(_run(model, dev + crisis))
    result = {
        "model": model.name,
        "cases_hash": key,
        "dev": asdict(score(outcomes[: len(dev)])),
        "crisis_file": asdict(score(outcomes[len(dev) :])),
        "dev_outcomes": [asdict(o) for o in outcomes[: len(dev)]],
    }
    cache.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def cross_validate(folds: int = 3, project_dir: Optional[Path] = None, out: Optional[Path] = None) -> Dict[str, Any]:
    """Intent cross-validation with ``rasa test nlu``: per-intent report and misclassified phrases."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    out = Path(out) if out else paths.var_dir() / "cross-validation"
    command = [
        sys.executable, "-m", "rasa", "test", "nlu",
        "--nlu", str(project_dir / "data" / "nlu"),
        "--config", str(project_dir / "config.yml"),
        "--cross-validation", "--folds", str(folds),
        "--out", str(out), "--no-plot",
    ]
    subprocess.run(command, cwd=str(project_dir), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = json.loads((out / "intent_report.json").read_text(encoding="utf-8"))
    errors_path = out / "intent_errors.json"
    errors = json.loads(errors_path.read_text(encoding="utf-8")) if errors_path.exists() else []
    return {"report": report, "errors": errors, "folds": folds}
