"""Training times for ``make bench``: a full training and a finetune after 10 new phrases.

Runs the maintainers' own commands (``python -m bot train``, ``phrases add``,
``train --finetune``) on a temporary copy of the project, with empty caches
for the full training, as a new maintainer's first run would be.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from bot import paths

NEW_PHRASES = [
    "how long till i stop flinching when my phone buzzes",
    "will i ever feel normal again after leaving him",
    "does the fog lift eventually",
    "what does getting better even look like after an abusive ex",
    "how do people rebuild their self worth after this",
    "is it normal to feel numb months after leaving",
    "when does the constant second guessing stop",
    "how do i start trusting my own judgement again",
    "what helps with healing after emotional abuse",
    "will i ever enjoy a relationship again",
]


def copy_project(target: Path) -> None:
    """What the maintainers' commands need, copied to ``target`` (the benchmark and the CLI test use it)."""
    root = paths.project_dir()
    for name in ("config.yml", "credentials.yml", "endpoints.yml", "domain", "data"):
        source = root / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / name)
    (target / "tests" / "data").mkdir(parents=True)
    for name in ("dev_cases.yml", "crisis_cases.yml"):
        shutil.copy(root / "tests" / "data" / name, target / "tests" / "data" / name)
    # What `python -m bot build` made (the spaCy pipeline, the encoder's graph): not training.
    shutil.copytree(root / "models" / "spacy-en", target / "models" / "spacy-en")
    if (root / "models" / "encoder").is_dir():
        shutil.copytree(root / "models" / "encoder", target / "models" / "encoder")


def _bot(env: Dict[str, str], *args: str) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "bot", *args], cwd=env["BOT_PROJECT_DIR"], env=env,
                            capture_output=True, text=True, timeout=1200)
    if result.returncode != 0:
        raise RuntimeError(f"bot {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return time.perf_counter() - started


def measure_training(log: Callable[[str], None] = print) -> Dict[str, float]:
    """Seconds for: full training (empty caches), finetune after adding 10 phrases."""
    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    try:
        project = work / "project"
        project.mkdir()
        copy_project(project)
        env = {**os.environ, "BOT_PROJECT_DIR": str(project), "BOT_VAR_DIR": str(project / "var"),
               "BOT_CACHE_DIR": str(work / "cache"), "RASA_CACHE_DIRECTORY": str(work / "rasa-cache"),
               "BOT_SERVER_URLS": "http://127.0.0.1:9"}  # promote: no server to swap here
        log("  python -m bot train (empty caches) ...")
        full = _bot(env, "train", "--force")
        log(f"  full training: {full:.0f} s (including validation)")
        _bot(env, "promote")
        _bot(env, "phrases", "add", "--intent", "healing", *NEW_PHRASES)
        log("  python -m bot train --finetune after adding 10 phrases ...")
        finetune = _bot(env, "train", "--finetune")
        log(f"  finetune: {finetune:.0f} s")
        return {"full_train_s": round(full, 1), "finetune_10_phrases_s": round(finetune, 1)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def markdown(figures: Dict[str, float]) -> List[str]:
    return [
        "| Maintainers' training (python -m bot ...) | seconds | floor |",
        "|---|---|---|",
        f"| `train` from scratch, empty caches, with validation | {figures['full_train_s']:g} | ≤ 90 |",
        f"| `train --finetune` after `phrases add` of 10 phrases | {figures['finetune_10_phrases_s']:g} | ≤ 30 |",
    ]
