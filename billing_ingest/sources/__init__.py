"""Where billing files come from (cloud storage exports), before a parser reads them."""
