"""The table of models, versions, backends and states logged at startup."""

from __future__ import annotations

from naiad.lifecycle import ModelLifecycle


def model_table(lifecycle: ModelLifecycle) -> str:
    """A fixed-width table with one row per model version (or per model that never loaded)."""
    backends = {record.name: record.backend for record in lifecycle.records()}
    rows = [("Model", "Version", "Backend", "State", "Reason")]
    for entry in lifecycle.index():
        rows.append(
            (
                entry.name,
                "-" if entry.version is None else str(entry.version),
                backends.get(entry.name, "") or "-",
                entry.state.value if entry.state else "-",
                entry.reason,
            )
        )
    if len(rows) == 1:
        rows.append(("(no models found)", "", "", "", ""))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"
    lines = [rule]
    for index, row in enumerate(rows):
        lines.append("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |")
        if index == 0:
            lines.append(rule)
    lines.append(rule)
    return "\n".join(lines)
