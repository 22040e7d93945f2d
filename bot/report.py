"""The HTML evaluation report: figures, per-intent scores, a confusion matrix, the misses."""
from __future__ import annotations

import base64
import html
import io
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

FLOORS = {
    "topic_accuracy": ("≥", 0.90),
    "confident_wrong_rate": ("≤", 0.03),
    "false_handoff_rate": ("≤", 0.02),
    "no_crisis_false_handoff_rate": ("≤", 0.10),
    "first_turn_disclaimer_rate": ("=", 1.0),
}


def predicted_label(outcome: Dict[str, Any]) -> str:
    if outcome.get("handoff"):
        return "crisis handoff"
    if outcome.get("fallback") and not outcome.get("answered"):
        return "fallback"
    return outcome.get("answered") or "none"


def dev_scores(outcomes: List[Dict[str, Any]]) -> Tuple[Dict[str, Dict[str, float]], List[Tuple[str, str]]]:
    """Per-topic precision, recall and F1 on the dev topic cases, and (expected, predicted) pairs."""
    pairs = [(o["topic"], predicted_label(o)) for o in outcomes if o.get("topic") and o["expect"] in ("topic", "no_crisis")]
    labels = sorted({e for e, _ in pairs})
    scores: Dict[str, Dict[str, float]] = {}
    for label in labels:
        tp = sum(1 for e, p in pairs if e == label and p == label)
        fp = sum(1 for e, p in pairs if e != label and p == label)
        fn = sum(1 for e, p in pairs if e == label and p != label)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores[label] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    return scores, pairs


def confusion_png(pairs: List[Tuple[str, str]]) -> str:
    """A confusion matrix picture (PNG, base64) drawn with matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    expected = sorted({e for e, _ in pairs})
    predicted = expected + sorted({p for _, p in pairs} - set(expected))
    counts = Counter(pairs)
    matrix = [[counts[(e, p)] for p in predicted] for e in expected]
    figure, axes = plt.subplots(figsize=(0.45 * len(predicted) + 3, 0.4 * len(expected) + 2.5), dpi=90)
    axes.imshow(matrix, cmap="Blues")
    axes.set_xticks(range(len(predicted)))
    axes.set_xticklabels(predicted, rotation=70, ha="right", fontsize=8)
    axes.set_yticks(range(len(expected)))
    axes.set_yticklabels(expected, fontsize=8)
    axes.set_xlabel("what the bot answered")
    axes.set_ylabel("what was asked")
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if value:
                axes.text(j, i, str(value), ha="center", va="center", fontsize=7, color="white" if value > 4 else "black")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _pct(value: Any) -> str:
    return f"{100 * float(value):.1f} %" if isinstance(value, (int, float)) else "-"


def summary_rows(candidate: Dict[str, Any], live: Optional[Dict[str, Any]]) -> List[Tuple[str, str, str, str]]:
    rows = []
    for key in ("topic_accuracy", "confident_wrong_rate", "fallback_rate", "crisis_recall", "false_handoff_rate",
                "no_crisis_false_handoff_rate", "first_turn_disclaimer_rate"):
        floor = FLOORS.get(key)
        rows.append((key.replace("_", " "), _pct(candidate["dev"][key]), _pct(live["dev"][key]) if live else "-",
                     f"{floor[0]} {_pct(floor[1])}" if floor else ""))
    rows.append(("crisis recall, crisis file", _pct(candidate["crisis_file"]["crisis_recall"]),
                 _pct(live["crisis_file"]["crisis_recall"]) if live else "-", "= 100.0 %"))
    rows.append(("false handoffs, crisis file negatives", _pct(candidate["crisis_file"]["no_crisis_false_handoff_rate"]),
                 _pct(live["crisis_file"]["no_crisis_false_handoff_rate"]) if live else "-", "≤ 10.0 %"))
    return rows


def comparison_text(candidate: Dict[str, Any], live: Optional[Dict[str, Any]]) -> str:
    lines = [f"{'':42} {'candidate':>12} {'live':>12}"]
    for name, cand, now, floor in summary_rows(candidate, live):
        lines.append(f"{name:42} {cand:>12} {now:>12}   {floor}")
    return "\n".join(lines)


def render(candidate: Dict[str, Any], live: Optional[Dict[str, Any]], cross_validation: Optional[Dict[str, Any]] = None) -> str:
    e = html.escape
    scores, pairs = dev_scores(candidate["dev_outcomes"])
    picture = confusion_png(pairs) if pairs else ""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Model evaluation</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:70rem;margin:auto;padding:1rem;color:#0b0c0c}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border-bottom:1px solid #b1b4b6;padding:.3rem .6rem;text-align:left}"
        ".bad{color:#b10e1e;font-weight:700}</style></head><body>",
        f"<h1>Model evaluation: {e(candidate['model'])}</h1>",
        f"<p>Compared with the live model: {e(live['model']) if live else 'none'}.</p>",
        "<h2>Figures</h2><table><tr><th>measure</th><th>candidate</th><th>live</th><th>floor</th></tr>",
    ]
    for name, cand, now, floor in summary_rows(candidate, live):
        parts.append(f"<tr><td>{e(name)}</td><td>{e(cand)}</td><td>{e(now)}</td><td>{e(floor)}</td></tr>")
    parts.append("</table><h2>Crisis recall by category (dev set, then crisis file)</h2><table><tr><th>category</th><th>dev</th><th>crisis file</th></tr>")
    for category in sorted(set(candidate["dev"]["crisis_recall_by_category"]) | set(candidate["crisis_file"]["crisis_recall_by_category"])):
        dev = candidate["dev"]["crisis_recall_by_category"].get(category)
        crisis = candidate["crisis_file"]["crisis_recall_by_category"].get(category)
        cls = " class='bad'" if (dev not in (None, 1.0)) or (crisis not in (None, 1.0)) else ""
        parts.append(f"<tr{cls}><td>{e(category)}</td><td>{_pct(dev)}</td><td>{_pct(crisis)}</td></tr>")
    parts.append("</table><h2>Per topic (dev set)</h2><table><tr><th>topic</th><th>precision</th><th>recall</th><th>F1</th><th>cases</th></tr>")
    for label, s in sorted(scores.items()):
        parts.append(f"<tr><td>{e(label)}</td><td>{_pct(s['precision'])}</td><td>{_pct(s['recall'])}</td><td>{_pct(s['f1'])}</td><td>{s['support']}</td></tr>")
    parts.append("</table>")
    if cross_validation:
        parts.append(f"<h2>Intent cross-validation ({cross_validation['folds']} folds)</h2><table><tr><th>intent</th><th>precision</th><th>recall</th><th>F1</th><th>support</th></tr>")
        for label, s in sorted(cross_validation["report"].items()):
            if isinstance(s, dict) and "precision" in s:
                parts.append(f"<tr><td>{e(label)}</td><td>{_pct(s['precision'])}</td><td>{_pct(s['recall'])}</td><td>{_pct(s['f1-score'])}</td><td>{s.get('support', '')}</td></tr>")
        parts.append("</table><h3>Misclassified training phrases</h3><ul>")
        for error in cross_validation["errors"][:300]:
            predicted = (error.get("intent_prediction") or {}).get("name")
            parts.append(f"<li>{e(error.get('text', ''))}: expected <b>{e(str(error.get('intent')))}</b>, got {e(str(predicted))}</li>")
        parts.append("</ul>")
    if picture:
        parts.append(f"<h2>Confusion matrix (dev set)</h2><img alt='Confusion matrix of the dev-set topics' src='data:image/png;base64,{picture}'>")
    parts.append("<h2>Misses on the dev set</h2><ul>")
    for miss in candidate["dev"]["misses"]:
        parts.append(f"<li>[{e(miss['id'])}] {e(miss['problem'])}, expected {e(str(miss['expected']))}: {e(miss['text'])}</li>")
    parts.append("</ul><h2>Misses on the crisis file</h2><ul>")
    for miss in candidate["crisis_file"]["misses"]:
        parts.append(f"<li>{e(miss['problem'])}: {e(miss['text'])}</li>")
    parts.append("</ul></body></html>")
    return "".join(parts)
