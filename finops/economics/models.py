"""The stored run-economics rollup (issues 30, 31, 32): one row per run rollup (RunCost: month,
team, run id, cluster, currency).

Why one row per RunCost row: the runs browser lists RunCost rows and sorts them; a row with the
same natural key is one unique-index lookup per listed run (no foreign key: the attribution
ledger replaces its RunCost rows in bulk, and must not have to know about this table). The
month-bound figures (waste by cause of the attempts on this cluster in this month, GPU and
facility kWh, kg CO2e) are this row's; the efficiency figures are the whole run's (every month,
cluster and attempt, as finops.run_metrics.selectors computes them), repeated on each of its
rows and refreshed on all of them whenever one of its months is rolled up.

Written only by finops.economics.services.economics_refresh (a pipeline step after attribution,
and after run metrics or energy are imported for a month); every figure is the one the
read-time selectors give for the same data.
"""

from __future__ import annotations

from django.db import models

from finops.core.money import ExactDecimalField, money_field
from finops.core.months import month_format
from finops.org.models import Team


class RunEconomics(models.Model):
    billing_period = models.DateField()
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, db_constraint=False
    )
    run_id = models.CharField(max_length=500)
    cluster = models.CharField(max_length=100, blank=True)
    currency = models.CharField(max_length=3)
    category = models.CharField(max_length=16)
    # This row's cost (RunCost.cost), for shares.
    cost = money_field()

    # Waste by cause of this cluster's attempts in this month (finops.waste), rounded down to
    # the money quantum; waste_total = rework + restart + abandoned + idle (cancelled apart).
    waste_rework = money_field(default=0)
    waste_restart = money_field(default=0)
    waste_abandoned = money_field(default=0)
    waste_cancelled = money_field(default=0)
    waste_idle = money_field(default=0)
    waste_total = money_field(default=0)
    # Causes whose part is an estimate (comma separated, in finops.waste.causes.CAUSES order).
    waste_estimated = models.CharField(max_length=100, blank=True)

    # Energy of this cluster's attempts in this month (finops.energy.selectors); null: the run
    # had no GPU time on a node in the ledger.
    gpu_kwh = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    measured_kwh = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    estimated_kwh = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    facility_kwh = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    co2e_kg = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    energy_estimated = models.BooleanField(default=False)
    # Facility kWh left out of co2e_kg (no grid intensity) and the factors applied (None / "":
    # parts of the row had different ones), as RunEnergy has them. Not the measured GPU-hours
    # (an inexact quotient: the team page's energy reads them at read time).
    co2e_missing_kwh = models.DecimalField(null=True, blank=True, max_digits=24, decimal_places=6)
    pue = models.DecimalField(null=True, blank=True, max_digits=12, decimal_places=6)
    pue_source = models.TextField(blank=True)
    grid_g_per_kwh = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=6)
    grid_source = models.TextField(blank=True)
    grid_year = models.CharField(max_length=20, blank=True)
    power_source = models.TextField(blank=True)

    # The whole run's efficiency (finops.run_metrics.selectors.RunEfficiency); has_metrics
    # False: the run has no metrics and these are null.
    has_metrics = models.BooleanField(default=False)
    useful_tokens = models.BigIntegerField(null=True, blank=True)
    samples = models.BigIntegerField(null=True, blank=True)
    steps = models.BigIntegerField(null=True, blank=True)
    run_cost = money_field(null=True, blank=True)
    # The whole run's GPU-seconds (the ledger's, exact); GPU-hours are these / 3600.
    run_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    cost_per_million_tokens = money_field(null=True, blank=True)
    cost_per_thousand_samples = money_field(null=True, blank=True)
    tokens_per_gpu_hour = models.DecimalField(null=True, blank=True, max_digits=30,
                                              decimal_places=6)  # fmt: skip
    mfu = models.DecimalField(null=True, blank=True, max_digits=20, decimal_places=6)
    flops_per_token = models.BigIntegerField(null=True, blank=True)
    peak_flops_per_gpu = models.DecimalField(null=True, blank=True, max_digits=30,
                                             decimal_places=0)  # fmt: skip
    peak_source = models.TextField(blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    dtype = models.CharField(max_length=16, blank=True)
    refreshed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["billing_period", "team", "run_id", "cluster", "currency"],
                name="unique_run_economics",
            )
        ]
        indexes = [
            models.Index(fields=["team", "run_id", "currency"], name="runeconomics_run"),
            models.Index(fields=["billing_period", "category", "team"], name="runeconomics_month"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} {month_format(self.billing_period)} {self.cluster} {self.currency}"


class CheckpointAdviceMonth(models.Model):
    """The stored checkpoint advice of a month (finops.waste.advice.checkpoint_advice of every
    team and the unowned runs), with the settings it was computed with: the pages read it only
    while the pricing assumptions' checkpoint and restart minutes and
    FINOPS_CHECKPOINT_WRITE_MINUTES are still these (else they compute it at read time).
    Rebuilt by economics_refresh (the pipeline's run-economics step, after attribution, and
    after run metrics are imported); its rows go with it. `stamp`: what the rows were read
    from (finops.economics.advice.advice_stamp, taken before the read); the recommendations
    step reads the rows only while it is the current one (blank: never, e.g. a month first
    stored by the refresh of some runs only, whose stamp is not taken)."""

    billing_period = models.DateField(unique=True)
    stamp = models.CharField(max_length=500, blank=True)
    checkpoint_interval_minutes = ExactDecimalField()
    restart_minutes = ExactDecimalField()
    checkpoint_write_minutes = ExactDecimalField()
    refreshed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"checkpoint advice {month_format(self.billing_period)}"


class CheckpointAdviceRow(models.Model):
    """One CheckpointAdvice (team, cluster, currency, pricing category) of a stored month; every
    figure as the read-time computation gives it (exact text: the same value and places)."""

    month = models.ForeignKey(CheckpointAdviceMonth, on_delete=models.CASCADE, related_name="rows")
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, db_constraint=False
    )
    cluster = models.CharField(max_length=100, blank=True)
    currency = models.CharField(max_length=3)
    pricing = models.CharField(max_length=16)
    cost = ExactDecimalField()
    attempt_hours = ExactDecimalField()
    gpu_hours = ExactDecimalField()
    interruptions = models.IntegerField()
    interruptions_per_gpu_hour = ExactDecimalField(null=True)
    interruptions_per_thousand_gpu_hours = ExactDecimalField(null=True)
    mean_hours_between_interruptions = ExactDecimalField(null=True)
    current_interval_minutes = ExactDecimalField()
    current_interval_source = models.CharField(max_length=16)
    optimal_interval_minutes = ExactDecimalField(null=True)
    monthly_saving = ExactDecimalField()
    measured_utilisation = ExactDecimalField(null=True)
    idle_in_allocation = ExactDecimalField()
    measured_cost = ExactDecimalField()
    used_cost = ExactDecimalField()
    capacity_interruptions = models.IntegerField(default=0)
    capacity_interruptions_per_thousand_gpu_hours = ExactDecimalField(null=True)

    class Meta:
        indexes = [models.Index(fields=["month", "team"], name="checkpointadvice_team")]

    def __str__(self) -> str:
        return f"{self.month} {self.cluster} {self.currency} {self.pricing}"


class TeamEnergyMonth(models.Model):
    """The stored per-team energy of a month (finops.energy.selectors.team_month_energy of every
    team and the unowned runs: the overview's energy card and the team page read it instead of
    every run row of the month). Rebuilt by economics_refresh from the month's RunEconomics
    rows it has just written, in the same transaction; `newest_job_energy` is the newest
    JobEnergy row then: an energy import after it (its refresh not run yet) makes the month
    stale, and the pages compute it at read time until the refresh lands."""

    billing_period = models.DateField(unique=True)
    newest_job_energy = models.BigIntegerField(null=True, blank=True)
    refreshed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"team energy {month_format(self.billing_period)}"


class TeamEnergyRow(models.Model):
    """One TeamEnergy (a team, or no team) of a stored month; every figure as the read-time
    computation gives it (exact text: the same value and places)."""

    month = models.ForeignKey(TeamEnergyMonth, on_delete=models.CASCADE, related_name="rows")
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, db_constraint=False
    )
    runs = models.IntegerField()
    gpu_kwh = ExactDecimalField()
    measured_kwh = ExactDecimalField()
    estimated_kwh = ExactDecimalField()
    facility_kwh = ExactDecimalField()
    co2e_kg = ExactDecimalField(null=True)
    estimated = models.BooleanField()
    co2e_missing_kwh = ExactDecimalField()
    measured_gpu_hours = ExactDecimalField()
    pue = ExactDecimalField(null=True)
    pue_source = models.TextField(blank=True)
    grid_g_per_kwh = ExactDecimalField(null=True)
    grid_source = models.TextField(blank=True)
    grid_year = models.CharField(max_length=20, blank=True)
    power_source = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["month", "team"], name="teamenergy_team")]

    def __str__(self) -> str:
        return f"{self.month} {self.team_id}"


class TeamWasteMonth(models.Model):
    """The stored waste per team and currency of a month (finops.economics.selectors
    .team_months_waste_stored of the month over every team and the unowned runs: the overview's
    waste card reads these few rows instead of summing every run row of four months). Rebuilt
    by economics_refresh from the month's RunEconomics rows it has just written, in the same
    transaction, so it holds what the run rows hold."""

    billing_period = models.DateField(unique=True)
    refreshed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"team waste {month_format(self.billing_period)}"


class TeamWasteRow(models.Model):
    """One TeamWaste (a team, or no team, in one currency) of a stored month; the parts by cause
    as exact text, the estimated causes comma-separated."""

    month = models.ForeignKey(TeamWasteMonth, on_delete=models.CASCADE, related_name="rows")
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, db_constraint=False
    )
    currency = models.CharField(max_length=3)
    runs = models.IntegerField()
    cost = ExactDecimalField()
    rework = ExactDecimalField()
    restart = ExactDecimalField()
    abandoned = ExactDecimalField()
    cancelled = ExactDecimalField()
    idle_in_allocation = ExactDecimalField()
    estimated_causes = models.TextField(blank=True)

    class Meta:
        indexes = [models.Index(fields=["month", "team"], name="teamwaste_team")]

    def __str__(self) -> str:
        return f"{self.month} {self.team_id} {self.currency}"


# The figures a stored row holds under the names of the objects it stands for (CheckpointAdvice,
# TeamEnergy): the store writes them and the reads give them back by these names, one list each.
CHECKPOINT_ADVICE_FIGURES = (
    "cluster", "currency", "pricing", "cost", "attempt_hours", "gpu_hours", "interruptions",
    "interruptions_per_gpu_hour", "interruptions_per_thousand_gpu_hours",
    "mean_hours_between_interruptions", "current_interval_minutes", "current_interval_source",
    "optimal_interval_minutes", "monthly_saving", "measured_utilisation", "idle_in_allocation",
    "measured_cost", "used_cost", "capacity_interruptions",
    "capacity_interruptions_per_thousand_gpu_hours",
)  # fmt: skip
# TeamEnergy's figures; the row also keeps measured_gpu_hours, read from the ledger when stored.
TEAM_ENERGY_FIGURES = (
    "runs", "gpu_kwh", "measured_kwh", "estimated_kwh", "facility_kwh", "co2e_kg", "estimated",
    "co2e_missing_kwh", "pue", "pue_source", "grid_g_per_kwh", "grid_source", "grid_year",
    "power_source",
)  # fmt: skip
