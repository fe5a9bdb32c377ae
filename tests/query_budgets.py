"""Query budgets shared by the page tests (tests/web/test_pages.py, test_runs_browser.py).

Waste by cause (issue 31, finops.waste): at most 6 reads for a page of runs (assumptions, ledger
by job, the jobs, their utilisation, metrics runs, their points) and 7 for a card or a run's
attempts (their rollups first), whatever the number of runs.

The overview's energy card (finops.web.energy_context.energy_card): the teams shown and the
month's ledger GPU rows of their runs (none in the page tests: the energy reads stop there)."""

WASTE_PAGE_QUERIES = 6
WASTE_CARD_QUERIES = 7
ENERGY_CARD_QUERIES = 2
