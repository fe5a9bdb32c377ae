"""Query budgets shared by the page tests (tests/web/test_pages.py, test_runs_browser.py).

Waste by cause (issue 31, finops.waste): at most 6 reads for a page of runs (assumptions, ledger
by job, the jobs, their utilisation, metrics runs, their points) and 7 for a run's attempts or
the checkpoint advice (their rollups first), whatever the number of runs; the waste card reads
the per-team sums the run-economics step stores (finops.economics.TeamWasteMonth: the stored
months, their rows with their teams: 2), and sums the run rows of a month not stored (the
sums per team, month and currency, the estimated causes, the teams: 3 more). The idle showback
of a page (its teams, the idle they are charged, their nodes, the ledger on them) at most 4.

The overview's energy card (finops.web.energy_context.energy_card, from the stored rollup): the
teams shown, the month's rollup rows of their runs, their slugs (when there are rows)."""

WASTE_PAGE_QUERIES = 6
# Idle showback (issue 29, finops.attribution.selectors.idle_showback): the teams, the idle
# they are charged, the nodes their jobs ran on, the ledger on those nodes; and the overview's
# idle advice (open idle and rightsizing recommendations of the teams). At most, at any size.
# The pipeline stores it with the month's ledger (issue 29, cold pages): the stored month, then
# its rows of the teams (2); a month attributed before the store: the 4 reads above after the
# stored month is not found (5, the budget: factories build months without the pipeline).
IDLE_SHOWBACK_QUERIES = 5
IDLE_ADVICE_QUERIES = 1
WASTE_CARD_QUERIES = 2 + 3
RUN_WASTE_QUERIES = 7
# The checkpoint advice of a page, stored by the run-economics step (issue 29): the stored month,
# the assumptions it was computed with, its rows with their teams (3); not stored (or stored
# with other assumptions): the read-time RUN_WASTE_QUERIES after the stored month and the
# assumptions (at most 2 + 7).
CHECKPOINT_ADVICE_QUERIES = 2 + RUN_WASTE_QUERIES
STORED_IDLE_SHOWBACK_QUERIES = 2
STORED_CHECKPOINT_ADVICE_QUERIES = 3
# The energy card: the month's stored per-team sums (economics.TeamEnergyMonth, issue 29) looked
# up first (1); stored: the newest energy import and the rows (2 more); not stored (months built
# by factories, or rolled up before the sums existed): the read-time read of the run rows (3).
ENERGY_CARD_QUERIES = 1 + 3
