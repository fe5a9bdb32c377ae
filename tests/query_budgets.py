"""Query budgets shared by the page tests (tests/web/test_pages.py, test_runs_browser.py).

Waste by cause (issue 31, finops.waste): at most 6 reads for a page of runs (assumptions, ledger
by job, the jobs, their utilisation, metrics runs, their points) and 7 for a card or a run's
attempts (their rollups first), whatever the number of runs; the idle showback of a page
(its teams, the idle they are charged, their nodes, the ledger on them) at most 4.

The overview's energy card (finops.web.energy_context.energy_card): the teams shown and the
month's ledger GPU rows of their runs (none in the page tests: the energy reads stop there)."""

WASTE_PAGE_QUERIES = 6
# Idle showback (issue 29, finops.attribution.selectors.idle_showback): the teams, the idle
# they are charged, the nodes their jobs ran on, the ledger on those nodes; and the overview's
# idle advice (open idle and rightsizing recommendations of the teams). At most, at any size.
IDLE_SHOWBACK_QUERIES = 4
IDLE_ADVICE_QUERIES = 1
WASTE_CARD_QUERIES = 7
ENERGY_CARD_QUERIES = 2
