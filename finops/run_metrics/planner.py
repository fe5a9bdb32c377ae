"""Plan a training run before booking it (issue 30): GPU-hours, wall time and cost. Pure.

The work is the run's FLOPs: flops_per_token x tokens (6 x parameters per token unless given,
the forward and backward pass of a dense transformer). At a model FLOPs utilisation `mfu` a GPU
does peak x mfu of them per second, so

    GPU-seconds = flops_per_token x tokens / (peak x mfu)

which is exactly the inverse of the MFU the run page measures (selectors.py): a run planned with
its own measured MFU is planned at its measured GPU-hours.

Each way of buying the hours (an `Offer`: a provider's instance type with its hourly prices) is
priced on whole instances: N = ceil(GPUs / GPUs per instance) instances for the wall time. Spot
adds the expected rework of synchronous training: any of the N instances interrupted rolls every
GPU back to the last checkpoint, so expected interruptions = N x wall hours x rate (per
instance-hour, from the pricing assumptions' band of the type), and each costs every instance
half a checkpoint interval plus the restart. Reserved prices are the effective hourly rate of a
commitment the organisation already holds (buying a one-year term for one run is not advised).
On premises is the pricing assumptions' TCO per GPU-hour at full use. Every figure is an
estimate and says so; each names its source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

from finops.core.money import EXACT

CENT = Decimal("0.01")
HOURS = Decimal("0.01")
FINE = Decimal("0.0001")
SECONDS_PER_HOUR = Decimal(3600)
ON_PREM = "on_prem"


@dataclass(frozen=True, slots=True)
class PlanRequest:
    model_params: int
    tokens: int
    gpu_model: str
    gpu_count: int
    mfu: Decimal
    peak_flops_per_gpu: Decimal
    flops_per_token: int | None = None

    @property
    def work_flops(self) -> Decimal:
        per_token = self.flops_per_token or 6 * self.model_params
        return Decimal(per_token) * Decimal(self.tokens)


@dataclass(frozen=True, slots=True)
class Offer:
    """One instance type's hourly prices (per instance) by kind: on_demand, spot, 1y_..."""

    provider: str
    instance_type: str
    region: str
    gpus_per_instance: int
    currency: str
    hourly: dict[str, Decimal]
    sources: dict[str, str] = field(default_factory=dict)
    # Interruptions per instance-hour on spot (the pricing assumptions' band of the type).
    interruption_rate: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class SpotTerms:
    checkpoint_interval_minutes: Decimal
    restart_minutes: Decimal

    @property
    def loss_hours(self) -> Decimal:
        return (self.checkpoint_interval_minutes / 2 + self.restart_minutes) / 60


@dataclass(frozen=True, slots=True)
class PlanOption:
    provider: str
    instance_type: str
    region: str
    pricing: str
    currency: str
    instances: int
    instance_hours: Decimal
    gpu_hours: Decimal
    wall_hours: Decimal
    cost: Decimal
    expected_interruptions: Decimal
    rework_gpu_hours: Decimal
    source: str


@dataclass(frozen=True, slots=True)
class PlanEstimate:
    gpu_hours: Decimal
    wall_hours: Decimal
    work_flops: Decimal
    options: list[PlanOption]


def gpu_seconds(request: PlanRequest) -> Decimal:
    return EXACT.divide(request.work_flops, request.peak_flops_per_gpu * request.mfu)


def _instances(gpu_count: int, per_instance: int) -> int:
    return int((Decimal(gpu_count) / Decimal(per_instance)).to_integral_value(ROUND_CEILING))


def _option(
    offer: Offer, kind: str, request: PlanRequest, wall: Decimal, spot: SpotTerms
) -> PlanOption:
    instances = _instances(request.gpu_count, offer.gpus_per_instance)
    interruptions = Decimal(0)
    rework_hours = Decimal(0)
    if kind == "spot":
        interruptions = instances * wall * offer.interruption_rate
        rework_hours = interruptions * spot.loss_hours
    hours = wall + rework_hours
    instance_hours = instances * hours
    gpu_hours = Decimal(request.gpu_count) * hours
    return PlanOption(
        provider=offer.provider,
        instance_type=offer.instance_type,
        region=offer.region,
        pricing=kind,
        currency=offer.currency,
        instances=instances,
        instance_hours=instance_hours.quantize(HOURS, context=EXACT),
        gpu_hours=gpu_hours.quantize(HOURS, context=EXACT),
        wall_hours=hours.quantize(HOURS, context=EXACT),
        cost=(instance_hours * offer.hourly[kind]).quantize(CENT, context=EXACT),
        expected_interruptions=interruptions.quantize(FINE, context=EXACT),
        rework_gpu_hours=(Decimal(request.gpu_count) * rework_hours).quantize(FINE, context=EXACT),
        source=offer.sources.get(kind, ""),
    )


def on_prem_option(
    request: PlanRequest, *, rate_per_gpu_hour: Decimal, currency: str, source: str
) -> PlanOption:
    hours = gpu_seconds(request) / SECONDS_PER_HOUR
    wall = hours / request.gpu_count
    return PlanOption(
        provider="on premises",
        instance_type="",
        region="",
        pricing=ON_PREM,
        currency=currency,
        instances=0,
        instance_hours=Decimal(0),
        gpu_hours=hours.quantize(HOURS, context=EXACT),
        wall_hours=wall.quantize(HOURS, context=EXACT),
        cost=(hours * rate_per_gpu_hour).quantize(CENT, context=EXACT),
        expected_interruptions=Decimal(0),
        rework_gpu_hours=Decimal(0),
        source=source,
    )


def estimate(
    request: PlanRequest,
    offers: Sequence[Offer],
    spot: SpotTerms,
    extra: Sequence[PlanOption] = (),
) -> PlanEstimate:
    """Every priced way to buy the run, cheapest first (ties: provider, type, pricing)."""
    seconds = gpu_seconds(request)
    hours = seconds / SECONDS_PER_HOUR
    wall = hours / request.gpu_count
    options = [
        _option(offer, kind, request, wall, spot)
        for offer in offers
        for kind in sorted(offer.hourly)
        if offer.gpus_per_instance > 0
    ]
    options.extend(extra)
    options.sort(key=lambda o: (o.currency, o.cost, o.provider, o.instance_type, o.pricing))
    return PlanEstimate(
        gpu_hours=hours.quantize(HOURS, context=EXACT),
        wall_hours=wall.quantize(HOURS, context=EXACT),
        work_flops=request.work_flops,
        options=options,
    )
