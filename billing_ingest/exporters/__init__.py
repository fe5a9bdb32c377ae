"""What goes out: the ledger's line items written back as standard files (FOCUS 1.2)."""
