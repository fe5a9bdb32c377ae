"""Cost anomalies, what drove them, and who said what about them.

An Anomaly is one event of one watched series (DESIGN section 6): a team's daily cost, a team's
cost of one service or provider, an endpoint's cost per 1,000 requests, a cluster's idle GPU
share, or the new cost sources of a team. `identity` (team, series and the first day it was
found with) is unique, so a re-run or a restated bill updates the row in place.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from finops.core.money import money_field
from finops.org.models import Team


class Anomaly(models.Model):
    class Kind(models.TextChoices):
        SPIKE = "spike", "Spike"
        LEVEL_SHIFT = "level_shift", "Level shift"
        NEW_SOURCE = "new_source", "New cost source"

    class Status(models.TextChoices):
        NEW = "new", "New"
        ACKNOWLEDGED = "acknowledged", "Acknowledged"
        RESOLVED = "resolved", "Resolved"
        EXPECTED = "expected", "Expected"

    class Severity(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"

    class Series(models.TextChoices):
        TEAM = "team", "Team daily cost"
        SERVICE = "service", "Team daily cost of a service"
        PROVIDER = "provider", "Team daily cost on a provider"
        ENDPOINT = "endpoint", "Endpoint cost per 1,000 requests"
        CLUSTER_IDLE = "cluster_idle", "Cluster idle GPU share"
        SOURCES = "sources", "New cost sources"

    # Statuses someone still has to look at.
    OPEN_STATUSES = (Status.NEW, Status.ACKNOWLEDGED)

    identity = models.CharField(max_length=700, unique=True)
    # Null: a cluster's idle share, which belongs to no team (finance sees it).
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="anomalies"
    )
    series_kind = models.CharField(max_length=16, choices=Series.choices)
    series_key = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    first_day = models.DateField()
    last_day = models.DateField()
    # The day the event first cleared both impact floors.
    detected_on = models.DateField()
    # Still going on at the newest day of data (a level shift is extended day by day).
    ongoing = models.BooleanField(default=False)
    # Money in `currency` (the reporting currency), summed over first_day..last_day.
    currency = models.CharField(max_length=3)
    actual = money_field()
    expected = money_field()
    impact = money_field()
    # The part of impact the usage drivers listed (services, runs, endpoints; a cluster's
    # nodes) do not explain: sum(their delta) + this = impact.
    unexplained = money_field()
    # The same for the SKU drivers and for the resource drivers of a team's cost, each a
    # breakdown of the whole impact (finops.anomalies.line_drivers); null for other series.
    unexplained_sku = money_field(null=True, blank=True)
    unexplained_resource = money_field(null=True, blank=True)
    # A cluster's idle share: the cluster's GPU node cost over the event's days, which the share
    # is of (actual / share_base is the event's idle share; actual and expected are idle cost,
    # so impact is the idle cost above the expected share). Null for other series.
    share_base = money_field(null=True, blank=True)
    severity = models.CharField(max_length=8, choices=Severity.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    # The series around the event for the chart: [{day, actual, expected, low, high}] as strings,
    # in the series' unit (money, money per 1k requests, or a share).
    chart = models.JSONField(default=list, blank=True)
    unit = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-first_day", "-id"]
        indexes = [
            models.Index(fields=["team", "status"]),
            models.Index(fields=["first_day"]),
            models.Index(fields=["team", "series_kind", "series_key"]),
        ]
        verbose_name_plural = "anomalies"

    def __str__(self) -> str:
        owner = self.team.slug if self.team else "-"
        return (
            f"{owner} {self.kind} {self.first_day}..{self.last_day} {self.impact} {self.currency}"
        )

    @property
    def kind_label(self) -> str:
        """The kind as people read it: an endpoint's series is its cost per 1,000 requests, a
        unit cost, so its events are "Unit cost spike" / "Unit cost level shift", not spend."""
        if self.series_kind == self.Series.ENDPOINT:
            return f"Unit cost {self.get_kind_display().lower()}"
        return str(self.get_kind_display())

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    @property
    def percent(self) -> object:
        return self.impact * 100 / self.expected if self.expected else None

    def driver_breakdowns(self) -> list[tuple[str, list[AnomalyDriver], Decimal]]:
        """(title, drivers, unexplained rest) per breakdown of the impact: each adds up to it."""
        drivers = list(self.drivers.all())
        sku, resource = AnomalyDriver.Dimension.SKU, AnomalyDriver.Dimension.RESOURCE
        if self.unexplained_sku is None:
            return [("What used it", drivers, self.unexplained)]
        out = [
            ("What used it", [d for d in drivers if d.dimension not in (sku, resource)],
             self.unexplained),
            ("By SKU", [d for d in drivers if d.dimension == sku], self.unexplained_sku),
        ]  # fmt: skip
        if self.unexplained_resource is not None:
            rows = [d for d in drivers if d.dimension == resource]
            out.append(("By resource", rows, self.unexplained_resource))
        return out


class AnomalyDriver(models.Model):
    class Dimension(models.TextChoices):
        SERVICE = "service"
        SKU = "sku"
        RESOURCE = "resource"
        RUN = "run"
        ENDPOINT = "endpoint"

    anomaly = models.ForeignKey(Anomaly, on_delete=models.CASCADE, related_name="drivers")
    position = models.PositiveSmallIntegerField()
    dimension = models.CharField(max_length=16, choices=Dimension.choices)
    key = models.CharField(max_length=1000)
    actual = money_field()
    expected = money_field()
    delta = money_field()

    class Meta:
        ordering = ["anomaly", "position"]
        constraints = [
            models.UniqueConstraint(fields=["anomaly", "position"], name="unique_driver_position")
        ]

    def __str__(self) -> str:
        return f"{self.dimension}:{self.key} {self.delta}"


class AnomalyStatusChange(models.Model):
    anomaly = models.ForeignKey(Anomaly, on_delete=models.CASCADE, related_name="status_changes")
    from_status = models.CharField(max_length=16, choices=Anomaly.Status.choices)
    to_status = models.CharField(max_length=16, choices=Anomaly.Status.choices)
    comment = models.TextField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.anomaly_id}: {self.from_status} -> {self.to_status}"
