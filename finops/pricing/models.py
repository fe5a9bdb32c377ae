"""Models: see the app docstring."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models

from finops.core.money import MoneyField, money_field
from finops.core.months import month_format
from finops.pricing.assumption_checks import BOUNDS, CURRENCY_CODE, structured_errors

# units + nanos/10^9 needs 9 decimals; units is an int64 (19 digits).
PRICE_DIGITS = 28
PRICE_PLACES = 9
PRICE_QUANTUM = Decimal(1).scaleb(-PRICE_PLACES)


class UsageType(models.TextChoices):
    """GCP Cloud Catalog category.usageType values."""

    ON_DEMAND = "OnDemand"
    PREEMPTIBLE = "Preemptible"
    COMMIT_1YR = "Commit1Yr"
    COMMIT_3YR = "Commit3Yr"


class SkuPrice(models.Model):
    """One price tier of one catalogue SKU as of its effective time.

    A SKU's price at a later effective time is a new row, so earlier prices stay comparable;
    a catalogue re-read at the same effective time updates the row in place."""

    provider = models.CharField(max_length=32, help_text="gcp")
    service_id = models.CharField(max_length=64, help_text="e.g. 6F81-5844-456A (Compute Engine)")
    sku_id = models.CharField(max_length=64)
    description = models.CharField(max_length=500)
    resource_family = models.CharField(max_length=100, blank=True)
    resource_group = models.CharField(max_length=100, blank=True, help_text="GPU, CPU, RAM ...")
    usage_type = models.CharField(max_length=32, help_text="OnDemand, Preemptible, Commit1Yr ...")
    gpu_model = models.CharField(
        max_length=50, blank=True, help_text="from a GPU SKU's description, e.g. A100-80GB"
    )
    regions = models.JSONField(default=list, blank=True, help_text="service regions")
    usage_unit = models.CharField(max_length=50, help_text="h, GiBy.h, ...")
    tier_start = models.DecimalField(
        max_digits=28, decimal_places=9, default=Decimal(0), help_text="startUsageAmount"
    )
    unit_price = MoneyField(max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES)
    currency = models.CharField(max_length=3)
    effective_time = models.DateTimeField()
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["provider", "sku_id", "tier_start", "-effective_time"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "sku_id", "tier_start", "effective_time"],
                name="skuprice_unique_tier_at_time",
            ),
        ]
        indexes = [models.Index(fields=["provider", "resource_group", "usage_type", "gpu_model"])]

    def __str__(self) -> str:
        return f"{self.provider} {self.sku_id} {self.unit_price} {self.currency}/{self.usage_unit}"


def _default_interruption_bands() -> dict[str, str]:
    # Share of spot instances interrupted per month, per AWS Spot Instance Advisor band; the
    # modelled value is the band's middle (">20%": 25%). Editable by finance.
    return {"<5%": "0.025", "5-10%": "0.075", "10-15%": "0.125", "15-20%": "0.175", ">20%": "0.25"}


def _default_family_bands() -> dict[str, str]:
    # Instance family (or "family:region") -> band. No published band was recorded for these
    # GPU families in the shipped snapshot, so all start at the worst band; finance edits them
    # from the Spot Instance Advisor (AWS) or their own interruption history.
    return {}


def _default_notice_seconds() -> dict[str, int]:
    # Interruption notice per provider: AWS spot 2 minutes, GCP spot / preemptible 30 seconds
    # (the defaults); Azure spot eviction 30 seconds (Scheduled Events).
    return {"aws": 120, "gcp": 30, "azure": 30}


def _default_reserved_ratios() -> dict[str, str]:
    # Price of a committed hour as a fraction of on demand, per term and payment option.
    # Placeholders until finance sets the contracted figures (or the snapshot has them).
    return {
        "1y_no_upfront": "0.70",
        "1y_all_upfront": "0.66",
        "3y_no_upfront": "0.50",
        "3y_all_upfront": "0.45",
    }


class PricingAssumptions(models.Model):
    """Every assumption of the pricing comparison (issue 13), one row (pk 1), edited by
    finance on the pricing settings page or through the API and shown beside every figure it
    produces.

    Every number has bounds (assumption_checks.BOUNDS) and the structured values are checked
    in clean(): the form and the API both save through full_clean(). A row stored otherwise
    (before the bounds, or by hand) is read through `usable()`, which puts the default in
    place of each value that fails, and says so."""

    # Spot
    spot_price_ratio = models.DecimalField(
        max_digits=6, decimal_places=4, default=Decimal("0.35"),
        validators=BOUNDS["spot_price_ratio"].validators(),
        help_text="spot price / on-demand price where the price catalogue has no spot price",
    )  # fmt: skip
    interruption_bands = models.JSONField(
        default=_default_interruption_bands,
        help_text="band -> share of spot instances interrupted per month",
    )
    family_bands = models.JSONField(
        default=_default_family_bands, blank=True,
        help_text='instance family or "family:region" -> band, e.g. {"p5": ">20%"}',
    )  # fmt: skip
    default_band = models.CharField(max_length=16, default=">20%")
    checkpoint_interval_minutes = models.DecimalField(
        max_digits=8, decimal_places=2, default=Decimal("20"),
        validators=BOUNDS["checkpoint_interval_minutes"].validators(),
        help_text="minutes between checkpoints (typically 15 to 30)",
    )  # fmt: skip
    restart_minutes = models.DecimalField(
        max_digits=8, decimal_places=2, default=Decimal("10"),
        validators=BOUNDS["restart_minutes"].validators(),
    )  # fmt: skip
    notice_seconds = models.JSONField(
        default=_default_notice_seconds, help_text="interruption notice per provider (seconds)"
    )
    # Reserved instances, savings plans, CUDs, Azure reservations
    reserved_ratios = models.JSONField(
        default=_default_reserved_ratios,
        help_text="committed price / on-demand price per term and payment option",
    )
    utilisation_window_days = models.PositiveIntegerField(
        default=90, validators=BOUNDS["utilisation_window_days"].validators(),
        help_text="history used for a team's utilisation and the demand curve",
    )  # fmt: skip
    recommendation_percentile = models.PositiveSmallIntegerField(
        default=10, validators=BOUNDS["recommendation_percentile"].validators(),
        help_text="commit to this percentile of GPUs in use per hour",
    )  # fmt: skip
    # On premises, per node
    node_capex = MoneyField(
        max_digits=16, decimal_places=2, default=Decimal("300000"),
        validators=BOUNDS["node_capex"].validators(),
    )  # fmt: skip
    amortisation_months = models.PositiveIntegerField(
        default=36, validators=BOUNDS["amortisation_months"].validators()
    )
    gpus_per_node = models.PositiveSmallIntegerField(
        default=8, validators=BOUNDS["gpus_per_node"].validators()
    )
    watts_per_gpu = models.DecimalField(
        max_digits=8, decimal_places=1, default=Decimal("700"),
        validators=BOUNDS["watts_per_gpu"].validators(),
    )  # fmt: skip
    pue = models.DecimalField(
        max_digits=4, decimal_places=2, default=Decimal("1.4"),
        validators=BOUNDS["pue"].validators(), help_text="typically 1.3 to 1.5",
    )  # fmt: skip
    price_per_kwh = MoneyField(
        max_digits=10, decimal_places=4, default=Decimal("0.12"),
        validators=BOUNDS["price_per_kwh"].validators(),
    )  # fmt: skip
    rack_per_node_month = MoneyField(
        max_digits=12, decimal_places=2, default=Decimal("1000"),
        validators=BOUNDS["rack_per_node_month"].validators(),
    )  # fmt: skip
    network_per_node_month = MoneyField(
        max_digits=12, decimal_places=2, default=Decimal("500"),
        validators=BOUNDS["network_per_node_month"].validators(),
    )  # fmt: skip
    staff_per_node_month = MoneyField(
        max_digits=12, decimal_places=2, default=Decimal("800"),
        validators=BOUNDS["staff_per_node_month"].validators(),
    )  # fmt: skip
    currency = models.CharField(
        max_length=3, default="USD", validators=[CURRENCY_CODE], help_text="of the on-prem figures"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "pricing assumptions"

    def __str__(self) -> str:
        return "pricing assumptions"

    def clean(self) -> None:
        errors = structured_errors(
            interruption_bands=self.interruption_bands,
            family_bands=self.family_bands,
            default_band=self.default_band,
            notice_seconds=self.notice_seconds,
            reserved_ratios=self.reserved_ratios,
        )
        if errors:
            raise ValidationError(errors)

    @classmethod
    def current(cls) -> PricingAssumptions:
        assumptions, created = cls.objects.get_or_create(pk=1)
        if created:
            # Read back, so the defaults carry the stored decimal places (20.00, not 20) and a
            # figure reads the same on the first request as on every later one.
            assumptions.refresh_from_db()
        return assumptions

    def usable(self) -> list[str]:
        """Put the default in place of every stored value that fails validation (in memory,
        nothing is saved) and return one warning per value replaced; [] when all are good."""
        warnings: list[str] = []
        for _ in range(3):  # a replaced band set can make the family bands fail in turn
            try:
                self.full_clean(validate_unique=False, validate_constraints=False)
            except ValidationError as exc:
                for name, messages in exc.message_dict.items():
                    warnings.append(self._default_in_place(name, " ".join(messages)))
                    if name == "default_band" and "interruption_bands" not in exc.message_dict:
                        # The default band is one of the default bands, not necessarily of the
                        # stored ones: both go back to their defaults together.
                        warnings.append(
                            self._default_in_place("interruption_bands", "with the default band")
                        )
            else:
                return warnings
        raise AssertionError("the defaults of the pricing assumptions do not validate")

    def _default_in_place(self, name: str, why: str) -> str:
        field = self._meta.get_field(name)
        assert isinstance(field, models.Field)
        stored, default = getattr(self, name), field.get_default()
        setattr(self, name, default)
        return (
            f"The stored {name} ({stored!r}) is refused ({why}); the default ({default!r}) is "
            "used until finance saves a good value."
        )


class InstancePrice(models.Model):
    """The hourly price of one instance type in one region, one way of buying it, as a
    `refresh_prices` command last read it from the provider's catalogue.

    One row per (provider, instance type, region, kind): a refresh replaces the figure and moves
    fetched_at. Where no refreshed row exists the shipped snapshot is used (finops.pricing.prices).
    """

    class Kind(models.TextChoices):
        ON_DEMAND = "on_demand"
        SPOT = "spot"
        RESERVED_1Y_NO_UPFRONT = "1y_no_upfront"
        RESERVED_1Y_ALL_UPFRONT = "1y_all_upfront"
        RESERVED_3Y_NO_UPFRONT = "3y_no_upfront"
        RESERVED_3Y_ALL_UPFRONT = "3y_all_upfront"

    provider = models.CharField(max_length=32, help_text="aws, gcp, azure, coreweave")
    instance_type = models.CharField(max_length=100, help_text="normalised: lower case")
    region = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    hourly = MoneyField(max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES)
    currency = models.CharField(max_length=3)
    source = models.CharField(
        max_length=300, help_text="the catalogue read, e.g. AWS Price List API (get_products)"
    )
    source_ref = models.CharField(
        max_length=300, blank=True, help_text="the catalogue's id of the figure (SKU, meter ...)"
    )
    effective_date = models.DateField(
        null=True, blank=True, help_text="the date the catalogue gives the price"
    )
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["provider", "instance_type", "region", "kind"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "instance_type", "region", "kind"],
                name="instanceprice_unique_figure",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.instance_type} {self.region} {self.kind} {self.hourly}"


class Recommendation(models.Model):
    """One action with its money (issue 27, DESIGN section 10): commit, spot, idle or rightsize,
    for a team (or, team null, for the organisation: finance only) in a billing month.

    Computed by finops.pricing.recommendations from the ledger and the price catalogue; a
    recompute updates the figures of the same (month, team, kind, key) in place and keeps its
    status and comment, so what a lead marked done or dismissed stays so."""

    class Kind(models.TextChoices):
        COMMIT = "commit"
        SPOT = "spot"
        RIGHTSIZE = "rightsize"
        IDLE = "idle"
        # From waste (finops.waste.recommendations): the Young/Daly checkpoint interval.
        CHECKPOINT = "checkpoint"

    class Status(models.TextChoices):
        OPEN = "open"
        DONE = "done"
        DISMISSED = "dismissed"

    class Confidence(models.TextChoices):
        HIGH = "high"
        MEDIUM = "medium"
        LOW = "low"

    billing_period = models.DateField()
    team = models.ForeignKey(
        "org.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # What the action is about, stable across recomputes, e.g. "aws:p5.48xlarge:us-east-1".
    key = models.CharField(max_length=500)
    title = models.CharField(max_length=300)
    action = models.TextField()
    monthly_savings = MoneyField(max_digits=20, decimal_places=2)
    currency = models.CharField(max_length=3)
    confidence = models.CharField(max_length=8, choices=Confidence.choices)
    assumptions = models.JSONField(default=dict)
    evidence = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    comment = models.TextField(blank=True)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    status_changed_by = models.CharField(max_length=150, blank=True)
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["billing_period", "team", "kind", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["billing_period", "team", "kind", "key", "currency"],
                name="recommendation_unique_action",
            ),
        ]
        indexes = [models.Index(fields=["billing_period", "team"])]

    def __str__(self) -> str:
        return f"{month_format(self.billing_period)} {self.kind} {self.key}: {self.monthly_savings}"


class RecommendationMonth(models.Model):
    """When a month's recommendations were last computed, and from what (`inputs`: the newest
    attribution, assumptions and refreshed prices they read). A reader recomputes a month whose
    inputs moved since."""

    billing_period = models.DateField(unique=True)
    computed_at = models.DateTimeField()
    inputs = models.CharField(max_length=200)
    # Why a team with GPU use has no advice of a kind: [{"team_id", "kind", "text"}], e.g. no
    # commitment because its P10 demand is 0 GPUs (recommendation_commits.commit_notes).
    notes = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"{month_format(self.billing_period)} computed {self.computed_at:%Y-%m-%d %H:%M}"


class TeamTypeUsage(models.Model):
    """A team's GPU compute of a month on one (provider, instance type, region), in one billing
    currency: its on-demand equivalent (ListCost), GPU-seconds, and the cost with no list price
    anywhere (`unpriced`). Stored by the pricing step (finops.pricing.services.team_usage_store)
    so the pricing page reads a few rows instead of summing the month's ledger."""

    billing_period = models.DateField()
    team = models.ForeignKey(
        "org.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    currency = models.CharField(max_length=3)
    provider = models.CharField(max_length=100, blank=True)
    instance_type = models.CharField(max_length=100, blank=True)
    region = models.CharField(max_length=100, blank=True)
    listed = money_field(default=Decimal(0))
    gpu_seconds = models.DecimalField(max_digits=28, decimal_places=6, default=Decimal(0))
    unpriced = money_field(default=Decimal(0))

    class Meta:
        indexes = [models.Index(fields=["billing_period", "team"])]

    def __str__(self) -> str:
        return f"{month_format(self.billing_period)} {self.team_id} {self.instance_type}"


class TeamUsageMonth(models.Model):
    """Which attribution of the month the stored TeamTypeUsage rows sum (its finish time): a
    reader uses them only while that is still the month's newest attribution."""

    billing_period = models.DateField(unique=True)
    attributed_at = models.DateTimeField()
    stored_at = models.DateTimeField()
    # The month's GPU node cost held by jobs and left idle (every currency, as the measured
    # cluster utilisation sums them: jobs / (jobs + idle)), so the pricing page need not sum
    # the ledger for it. Null: stored before they were (the page sums the ledger).
    gpu_jobs_cost = money_field(null=True, blank=True)
    gpu_idle_cost = money_field(null=True, blank=True)

    def __str__(self) -> str:
        return f"{month_format(self.billing_period)} usage of {self.attributed_at:%Y-%m-%d %H:%M}"
