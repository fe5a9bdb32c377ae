"""How the job import commands print a batch's notes (ImportBatch.notes: note -> records)."""

from __future__ import annotations

from collections.abc import Mapping

from finops.core.wording import counted

WARNING = "warning: "


def note_lines(notes: Mapping[str, int], *, unit: str = "pod") -> list[str]:
    """One line per note: `note: 2 pods: ...`, or `warning: ... (3 pods)` for a warning
    (a note that starts with "warning: "); `unit` is the singular."""
    lines = []
    for note, count in notes.items():
        if note.startswith(WARNING):
            lines.append(f"{note} ({counted(count, unit)})")
        else:
            lines.append(f"note: {counted(count, unit)}: {note}")
    return lines
