"""Which model is live, which were live before, and who promoted them (models/registry.json).

``promote`` records every change here; ``rollback`` goes back one step; the
servers started by ``bot run`` load the live model.
"""
from __future__ import annotations

import getpass
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from bot import paths
from bot.training import all_models


def _path(models_dir: Optional[Path] = None) -> Path:
    return (Path(models_dir) if models_dir else paths.models_dir()) / "registry.json"


def read(models_dir: Optional[Path] = None) -> Dict[str, Any]:
    path = _path(models_dir)
    if not path.exists():
        return {"live": None, "history": []}
    return json.loads(path.read_text(encoding="utf-8"))


def write(registry: Dict[str, Any], models_dir: Optional[Path] = None) -> None:
    path = _path(models_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(registry, indent=2), encoding="utf-8")
    tmp.replace(path)


def live_model(models_dir: Optional[Path] = None) -> Optional[Path]:
    """The live model's path, if one was promoted and is still on disk."""
    models_dir = Path(models_dir) if models_dir else paths.models_dir()
    name = read(models_dir).get("live")
    if name and (models_dir / name).exists():
        return models_dir / name
    return None


def record_promotion(
    model: Path, forced: bool = False, reason: str = "", models_dir: Optional[Path] = None, report: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    registry = read(models_dir)
    entry = {
        "model": model.name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "by": _who(),
        "forced": forced,
        "reason": reason,
        "previous": registry.get("live"),
        "report": report or {},
    }
    registry["history"].append(entry)
    registry["live"] = model.name
    write(registry, models_dir)
    return entry


def previous_model(models_dir: Optional[Path] = None) -> Optional[str]:
    """The model that was live before the current one."""
    registry = read(models_dir)
    for entry in reversed(registry["history"]):
        if entry["model"] == registry.get("live") and entry.get("previous"):
            return entry["previous"]
    return None


def record_rollback(to_model: str, models_dir: Optional[Path] = None) -> Dict[str, Any]:
    registry = read(models_dir)
    entry = {
        "model": to_model,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "by": _who(),
        "forced": False,
        "reason": f"rollback from {registry.get('live')}",
        "previous": _before(registry, to_model),
        "rollback": True,
    }
    registry["history"].append(entry)
    registry["live"] = to_model
    write(registry, models_dir)
    return entry


def _before(registry: Dict[str, Any], model: str) -> Optional[str]:
    for entry in reversed(registry["history"]):
        if entry["model"] == model:
            return entry.get("previous")
    return None


def _who() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001  (no user name in some containers)
        return "unknown"


def serving_model(models_dir: Optional[Path] = None) -> Optional[Path]:
    """The live model, or else the newest trained one."""
    live = live_model(models_dir)
    if live:
        return live
    models = all_models(models_dir)
    return models[0] if models else None


def listing(models_dir: Optional[Path] = None) -> List[Dict[str, Any]]:
    registry = read(models_dir)
    return [
        {"model": m.name, "live": m.name == registry.get("live"), "size_kb": m.stat().st_size // 1024}
        for m in all_models(models_dir)
    ]
