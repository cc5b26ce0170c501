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
    # a cell of several lines (a python model's reason with its At: block) spans as many table lines, as in Triton
    cells = [[cell.splitlines() or [""] for cell in row] for row in rows]
    widths = [max(len(line) for row in cells for line in row[column]) for column in range(len(rows[0]))]
    rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"
    lines = [rule]
    for index, row in enumerate(cells):
        for depth in range(max(len(cell) for cell in row)):
            parts = (cell[depth] if depth < len(cell) else "" for cell in row)
            lines.append("| " + " | ".join(part.ljust(width) for part, width in zip(parts, widths, strict=True)) + " |")
        if index == 0:
            lines.append(rule)
    lines.append(rule)
    return "\n".join(lines)
