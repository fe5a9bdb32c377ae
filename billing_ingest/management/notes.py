"""How the job import commands print a batch's notes (ImportBatch.notes: note -> records)."""

from __future__ import annotations

from collections.abc import Mapping

WARNING = "warning: "


def note_lines(notes: Mapping[str, int], *, unit: str = "pod(s)") -> list[str]:
    """One line per note: `note: 2 pod(s): ...`, or `warning: ... (3 pod(s))` for a warning
    (a note that starts with "warning: ")."""
    lines = []
    for note, count in notes.items():
        if note.startswith(WARNING):
            lines.append(f"{note} ({count} {unit})")
        else:
            lines.append(f"note: {count} {unit}: {note}")
    return lines
