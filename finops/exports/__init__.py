"""What goes out: the ledger's line items written back as standard files (FOCUS 1.2).

columns.py (the FOCUS columns and their Arrow types), mapping.py (a line item -> a FOCUS row,
pure), selectors.py (the month's reads), writer.py (Parquet or CSV, atomically), units.py
(provider units in the FOCUS Unit Format), tasks.py and the export_focus command."""
