"""The benchmark's table: ratios to the baseline, with the baseline's burst measured twice."""
from __future__ import annotations

from pathlib import Path

from bot.bench.runner import Variant, baseline_burst, report


def _variants(again: bool) -> dict:
    base = {"burst50": {"per_second": 40.0, "errors": 0}, "load_s": 20.0}
    if again:
        base["burst50_again"] = {"per_second": 30.0, "errors": 3}
    return {
        "baseline": Variant("baseline", "stock", Path("."), Path("."), results=base),
        "project": Variant("project", "bot", Path("."), Path("."),
                           results={"burst50": {"per_second": 175.0, "errors": 0}, "load_s": 10.0}),
    }


def _row(table: str, title: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {title}"))


def test_the_throughput_ratio_is_to_the_mean_of_both_baseline_measures() -> None:
    variants = _variants(again=True)
    assert baseline_burst(variants["baseline"]) == 35.0
    row = _row(report(variants), "50 visitors back to back: messages/s")
    assert "40 then 30 (mean 35)" in row
    assert "175 (5.00×)" in row
    assert _row(report(variants), "Errors").endswith("| 3 | 0 |")  # the second measure's errors count


def test_with_one_baseline_measure_the_ratio_is_to_it() -> None:
    variants = _variants(again=False)
    row = _row(report(variants), "50 visitors back to back: messages/s")
    assert "| 40 |" in row and "175 (4.38×)" in row
    assert "0.50× of baseline" in _row(report(variants), "Model load")
