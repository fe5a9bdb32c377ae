"""Query budgets shared by the page tests (tests/web/test_pages.py, test_runs_browser.py).

Waste by cause (issue 31, finops.waste): at most 6 reads for a page of runs (assumptions, ledger
by job, the jobs, their utilisation, metrics runs, their points) and 7 for a run's attempts or
the checkpoint advice (their rollups first), whatever the number of runs; the waste card reads
the stored rollup (finops.economics: the sums per team, month and currency, the estimated
causes, the teams): 3. The idle showback of a page (its teams, the idle they are charged, their
nodes, the ledger on them) at most 4.

The overview's energy card (finops.web.energy_context.energy_card, from the stored rollup): the
teams shown, the month's rollup rows of their runs, their slugs (when there are rows)."""

WASTE_PAGE_QUERIES = 6
# Idle showback (issue 29, finops.attribution.selectors.idle_showback): the teams, the idle
# they are charged, the nodes their jobs ran on, the ledger on those nodes; and the overview's
# idle advice (open idle and rightsizing recommendations of the teams). At most, at any size.
IDLE_SHOWBACK_QUERIES = 4
IDLE_ADVICE_QUERIES = 1
WASTE_CARD_QUERIES = 3
RUN_WASTE_QUERIES = 7
ENERGY_CARD_QUERIES = 3
