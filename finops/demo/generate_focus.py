"""Render the demo month's bills as FOCUS 1.2 rows, one file per provider.

Amortisation follows the FOCUS 1.2 commitment-discount examples: a commitment's monthly fee is a
Purchase row (BilledCost = fee, EffectiveCost 0); the usage it covers is Committed with BilledCost
0 and EffectiveCost at the commitment rate; hours the commitment had nothing to cover are
`Unused` rows on the commitment itself. So for every commitment the Purchase BilledCost equals the
EffectiveCost of its Used plus Unused rows, and cash (BilledCost) equals amortised
(EffectiveCost) over the month. Money is Decimal throughout and written with `format(d, "f")`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from random import Random

from finops.demo.fleet import DAY, HOUR, Month, Node, Pricing
from finops.demo.focus_catalogue import (
    CENT,
    COMMITMENTS,
    COREWEAVE_CONTRACT_FACTOR,
    DAILY_CHARGES,
    FOCUS_COLUMNS,
    PLACES,
    PROVIDERS,
    Commitment,
    DailyCharge,
    Provider,
    Row,
    SubAccount,
    money,
    timestamp,
)


@dataclass
class _Ctx:
    provider: Provider
    month: Month
    rng: Random
    invoice_id: str

    def base(self, account: SubAccount) -> Row:
        row = dict.fromkeys(FOCUS_COLUMNS, "")
        cloud = self.provider.cloud
        row.update(
            BillingAccountId=self.provider.billing_account_id,
            BillingAccountName=self.provider.billing_account_name,
            BillingAccountType=self.provider.billing_account_type,
            BillingCurrency="USD",
            BillingPeriodStart=timestamp(self.month.start),
            BillingPeriodEnd=timestamp(self.month.end),
            InvoiceId=self.invoice_id,
            InvoiceIssuerName=self.provider.issuer,
            PublisherName=self.provider.issuer,
            ProviderName=cloud.provider,
            ServiceProviderName=cloud.provider,
            PricingCurrency="USD",
            RegionId=cloud.region_id,
            RegionName=cloud.region_name,
            SubAccountId=account.id,
            SubAccountName=account.name,
            SubAccountType=self.provider.sub_account_type,
        )
        return row

    def period(self, row: Row, start: int, end: int) -> None:
        row["ChargePeriodStart"] = timestamp(self.month.start + timedelta(seconds=start))
        row["ChargePeriodEnd"] = timestamp(self.month.start + timedelta(seconds=end))


def _costs(
    row: Row,
    *,
    quantity: Decimal,
    list_price: Decimal,
    contracted_price: Decimal,
    invoiced: Decimal,
    effective: Decimal,
) -> None:
    list_cost = (quantity * list_price).quantize(PLACES)
    contracted = (quantity * contracted_price).quantize(PLACES)
    row.update(
        PricingQuantity=money(quantity),
        ListUnitPrice=money(list_price),
        PricingCurrencyListUnitPrice=money(list_price),
        ContractedUnitPrice=money(contracted_price),
        PricingCurrencyContractedUnitPrice=money(contracted_price),
        ListCost=money(list_cost),
        ContractedCost=money(contracted),
        BilledCost=money(invoiced),
        EffectiveCost=money(effective),
        PricingCurrencyEffectiveCost=money(effective),
    )


def _sku(rng: Random) -> str:
    alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
    return "".join(rng.choice(alphabet) for _ in range(16))


def _resource_id(ctx: _Ctx, node: Node) -> str:
    provider = ctx.provider
    if provider.cloud.provider == "AWS":
        return (
            f"arn:aws:ec2:{provider.cloud.region_id}:{provider.compute.id}:instance/"
            f"i-0{ctx.rng.getrandbits(64):016x}"
        )
    if provider.cloud.provider == "GCP":
        return (
            f"//compute.googleapis.com/projects/{provider.compute.id}/zones/{provider.zone}"
            f"/instances/{node.hostname}"
        )
    if provider.cloud.provider == "Azure":
        group = "rg-gpu-reserved" if node.pricing == Pricing.COMMITTED else "rg-gpu"
        return (
            f"{provider.compute.id}/resourcegroups/{group}/providers/microsoft.compute"
            f"/virtualmachines/{node.hostname}"
        )
    return f"coreweave:{provider.cloud.region_id.lower()}:node/{ctx.rng.getrandbits(96):024x}"


def _spot_prices(rng: Random, month: Month, list_price: Decimal) -> list[Decimal]:
    """Daily spot price: 40-60 % below on demand, drifting slowly."""
    discount = rng.uniform(0.42, 0.58)
    prices = []
    for _ in range(month.days):
        discount = min(0.60, max(0.40, discount + rng.uniform(-0.02, 0.02)))
        prices.append((list_price * Decimal(str(round(1 - discount, 4)))).quantize(CENT))
    return prices


def _node_rows(ctx: _Ctx, node: Node, sku: str, spot: list[Decimal]) -> Iterator[Row]:
    itype = node.instance_type
    commitment = COMMITMENTS.get(node.pool.commitment)
    contracted_price = itype.list_price
    if itype.provider == "CoreWeave":
        contracted_price = (itype.list_price * COREWEAVE_CONTRACT_FACTOR).quantize(CENT)
    tags = {"cluster": node.cluster}
    if itype.provider == "AWS":
        tags["Name"] = node.hostname
    if node.pool.tag:
        tags[node.pool.tag[0]] = node.pool.tag[1]
    # Everything but the charge period (and the spot price) is the same for every hour of a node.
    template = ctx.base(ctx.provider.compute)
    template.update(
        AvailabilityZone=ctx.provider.zone,
        ChargeCategory="Usage",
        ChargeFrequency="Usage-Based",
        ConsumedQuantity="1",
        ConsumedUnit="Hours",
        PricingUnit="Hours",
        PricingCategory=node.pricing,
        ResourceId=_resource_id(ctx, node),
        ResourceName=node.hostname,
        ResourceType=ctx.provider.resource_type,
        ServiceCategory="Compute",
        ServiceSubcategory="Virtual Machines",
        ServiceName=ctx.provider.compute_service,
        SkuId=sku,
        SkuMeter="Compute Usage",
        SkuPriceDetails=json.dumps({"InstanceType": itype.name, "x_GpuCount": itype.gpus}),
        Tags=json.dumps(tags, sort_keys=True),
        x_InstanceType=itype.name,
    )
    one = Decimal(1)
    if commitment is not None:
        rate = commitment.rate()
        template["SkuPriceId"] = f"{sku}.COMMITTED"
        template["ChargeDescription"] = f"{itype.name} usage covered by {commitment.name}"
        _commitment_columns(template, commitment, "Used", rate)
        _costs(
            template, quantity=one, list_price=itype.list_price,
            contracted_price=contracted_price, invoiced=Decimal(0), effective=rate,
        )  # fmt: skip
    elif node.pricing == Pricing.STANDARD:
        template["SkuPriceId"] = f"{sku}.ONDEMAND"
        template["ChargeDescription"] = f"${contracted_price} per On Demand {itype.name} hour"
        _costs(
            template, quantity=one, list_price=itype.list_price,
            contracted_price=contracted_price, invoiced=contracted_price,
            effective=contracted_price,
        )  # fmt: skip
    else:
        template["SkuPriceId"] = f"{sku}.SPOT"
    for hour in node.billed_hours():
        row = dict(template)
        ctx.period(row, hour * HOUR, (hour + 1) * HOUR)
        if node.pricing == Pricing.DYNAMIC:
            price = spot[hour // 24]
            row["ChargeDescription"] = f"${price} per Spot {itype.name} instance-hour"
            _costs(
                row, quantity=one, list_price=itype.list_price, contracted_price=price,
                invoiced=price, effective=price,
            )  # fmt: skip
        yield row


def _commitment_columns(row: Row, commitment: Commitment, status: str, rate: Decimal) -> None:
    row.update(
        CommitmentDiscountId=commitment.id,
        CommitmentDiscountName=commitment.name,
        CommitmentDiscountType=commitment.type,
        CommitmentDiscountCategory=commitment.category,
        CommitmentDiscountStatus=status,
        CommitmentDiscountQuantity=money(rate) if commitment.category == "Spend" else "1",
        CommitmentDiscountUnit="USD" if commitment.category == "Spend" else "Hours",
    )


def _commitment_rows(ctx: _Ctx, commitment: Commitment, nodes: list[Node], sku: str) -> list[Row]:
    """The monthly fee and the hours the commitment covered nothing (Unused)."""
    rate = commitment.rate()
    hours = ctx.month.seconds // HOUR
    rows: list[Row] = []
    covered = [0] * hours
    for node in nodes:
        for hour in node.billed_hours():
            covered[hour] += 1
    for hour, used in enumerate(covered):
        unused = len(nodes) - used
        if unused <= 0:
            continue
        row = ctx.base(ctx.provider.compute)
        ctx.period(row, hour * HOUR, (hour + 1) * HOUR)
        row.update(
            ChargeCategory="Usage",
            ChargeFrequency="Usage-Based",
            ChargeDescription=f"Unused {commitment.type.lower()} hours: {commitment.name}",
            PricingCategory=Pricing.COMMITTED,
            PricingUnit="Hours",
            ResourceId=commitment.id,
            ResourceName=commitment.name,
            ResourceType=commitment.type,
            ServiceCategory="Compute",
            ServiceSubcategory="Virtual Machines",
            ServiceName=ctx.provider.compute_service,
            SkuId=sku,
            SkuPriceId=f"{sku}.COMMITTED",
        )
        _commitment_columns(row, commitment, "Unused", rate)
        effective = rate * unused
        _costs(
            row, quantity=Decimal(unused), list_price=Decimal(0), contracted_price=Decimal(0),
            invoiced=Decimal(0), effective=effective,
        )  # fmt: skip
        rows.append(row)
    fee = rate * len(nodes) * hours
    row = ctx.base(ctx.provider.compute)
    ctx.period(row, 0, ctx.month.seconds)
    row.update(
        ChargeCategory="Purchase",
        ChargeFrequency="Recurring",
        ChargeDescription=f"Monthly fee: {commitment.name}",
        PricingCategory=Pricing.STANDARD,
        PricingUnit="Hours",
        ResourceId=commitment.id,
        ResourceName=commitment.name,
        ResourceType=commitment.type,
        ServiceCategory="Compute",
        ServiceSubcategory="Virtual Machines",
        ServiceName=ctx.provider.compute_service,
        SkuId=sku,
        SkuPriceId=f"{sku}.PURCHASE",
        CommitmentDiscountId=commitment.id,
        CommitmentDiscountName=commitment.name,
        CommitmentDiscountType=commitment.type,
        CommitmentDiscountCategory=commitment.category,
        CommitmentDiscountQuantity=money(fee)
        if commitment.category == "Spend"
        else str(len(nodes) * hours),
        CommitmentDiscountUnit="USD" if commitment.category == "Spend" else "Hours",
    )
    _costs(
        row, quantity=Decimal(len(nodes) * hours), list_price=rate, contracted_price=rate,
        invoiced=fee, effective=Decimal(0),
    )  # fmt: skip
    rows.append(row)
    return rows


def _daily_rows(ctx: _Ctx, charge: DailyCharge, factor: Decimal) -> Iterator[Row]:
    account = ctx.provider.data if charge.data_account else ctx.provider.compute
    sku = _sku(ctx.rng)
    for day in range(ctx.month.days):
        jitter = Decimal(1)
        if not charge.growth:
            jitter = Decimal(str(round(ctx.rng.uniform(0.9, 1.1), 3)))
        quantity = (charge.daily_quantity * factor * (1 + charge.growth * day) * jitter).quantize(
            Decimal("0.000001")
        )
        cost = (quantity * charge.unit_price).quantize(PLACES)
        row = ctx.base(account)
        ctx.period(row, day * DAY, (day + 1) * DAY)
        row.update(
            ChargeCategory="Usage",
            ChargeFrequency="Usage-Based",
            ChargeDescription=f"${charge.unit_price} per {charge.unit} ({charge.service_name})",
            ConsumedQuantity=money(quantity),
            ConsumedUnit=charge.unit,
            PricingCategory=Pricing.STANDARD,
            PricingUnit=charge.unit,
            ResourceId=charge.resource_id,
            ResourceName=charge.resource_name,
            ResourceType=charge.resource_type,
            ServiceCategory=charge.service_category,
            ServiceSubcategory=charge.service_subcategory,
            ServiceName=charge.service_name,
            SkuId=sku,
            SkuPriceId=f"{sku}.STANDARD",
            Tags=json.dumps(charge.tags, sort_keys=True) if charge.tags else "",
        )
        _costs(
            row, quantity=quantity, list_price=charge.unit_price,
            contracted_price=charge.unit_price, invoiced=cost, effective=cost,
        )  # fmt: skip
        yield row


def _monthly_row(
    ctx: _Ctx, *, category: str, description: str, amount: Decimal, service: str, sub: str
) -> Row:
    """A support fee, tax or credit for the whole month (EffectiveCost = BilledCost)."""
    row = ctx.base(ctx.provider.compute)
    ctx.period(row, 0, ctx.month.seconds)
    service_category = "Management and Governance" if sub == "Support" else "Other"
    row.update(
        ChargeCategory=category,
        ChargeFrequency="Recurring" if category != "Credit" else "One-Time",
        ChargeDescription=description,
        PricingCategory="" if category in ("Tax", "Credit") else Pricing.STANDARD,
        ServiceCategory=service_category,
        ServiceSubcategory=sub,
        ServiceName=service,
        BilledCost=money(amount),
        EffectiveCost=money(amount),
        PricingCurrencyEffectiveCost=money(amount),
        ListCost=money(amount) if category == "Purchase" else "",
        ContractedCost=money(amount) if category == "Purchase" else "",
    )
    return row


def _sum(rows: list[Row], column: str) -> Decimal:
    return sum((Decimal(r[column]) for r in rows if r[column]), Decimal(0))


def _monthly_extras(ctx: _Ctx, rows: list[Row], factor: Decimal) -> list[Row]:
    provider = ctx.provider.cloud.provider
    usage = _sum(rows, "BilledCost")
    extras: list[Row] = []
    if provider == "AWS":
        fee = (usage * Decimal("0.03")).quantize(CENT)
        extras.append(
            _monthly_row(
                ctx, category="Purchase", description="AWS Support (Enterprise On-Ramp)",
                amount=fee, service="AWS Support (Enterprise On-Ramp)", sub="Support",
            )
        )  # fmt: skip
        extras.append(
            _monthly_row(
                ctx, category="Tax", description="Sales tax on AWS Support",
                amount=(fee * Decimal("0.06")).quantize(CENT), service="Tax",
                sub="Other (Other)",
            )
        )  # fmt: skip
        extras.append(
            _monthly_row(
                ctx, category="Credit", description="AWS Activate credit",
                amount=(Decimal("-2500") * factor).quantize(CENT),
                service=ctx.provider.compute_service, sub="Other (Other)",
            )
        )  # fmt: skip
    elif provider == "GCP":
        extras.append(
            _monthly_row(
                ctx, category="Credit", description="Promotional credit: AI startup program",
                amount=(Decimal("-15000") * factor).quantize(CENT), service="Compute Engine",
                sub="Other (Other)",
            )
        )  # fmt: skip
    elif provider == "Azure":
        extras.append(
            _monthly_row(
                ctx, category="Purchase", description="Azure Support: Professional Direct",
                amount=Decimal("1000.00"), service="Azure Support", sub="Support",
            )
        )  # fmt: skip
    elif provider == "CoreWeave":
        storage = _sum([r for r in rows if r["ServiceCategory"] == "Storage"], "BilledCost")
        extras.append(
            _monthly_row(
                ctx, category="Tax", description="NJ sales and use tax on storage (6.625%)",
                amount=(storage * Decimal("0.06625")).quantize(CENT), service="Tax",
                sub="Other (Other)",
            )
        )  # fmt: skip
        extras.append(
            _monthly_row(
                ctx, category="Credit", description="SLA credit: node availability below 99.5%",
                amount=(Decimal("-4200.00") * factor).quantize(CENT),
                service=ctx.provider.compute_service, sub="Other (Other)",
            )
        )  # fmt: skip
    return extras


def provider_rows(
    *, rng: Random, month: Month, provider: str, nodes: list[Node], small: bool
) -> list[Row]:
    """Every FOCUS row of one provider's bill for the month."""
    spec = PROVIDERS[provider]
    invoice = f"{provider[:3].upper()}-{month.label}-{rng.randint(10**6, 10**7)}"
    ctx = _Ctx(spec, month, rng, invoice)
    factor = Decimal("0.2") if small else Decimal(1)
    rows: list[Row] = []
    skus: dict[str, str] = {}
    spot: dict[str, list[Decimal]] = {}
    for node in nodes:
        name = node.instance_type.name
        if name not in skus:
            skus[name] = _sku(rng)
            spot[name] = _spot_prices(rng, month, node.instance_type.list_price)
        rows.extend(_node_rows(ctx, node, skus[name], spot[name]))
    for key, commitment in COMMITMENTS.items():
        covered = [n for n in nodes if n.pool.commitment == key]
        if commitment.provider == provider and covered:
            rows.extend(_commitment_rows(ctx, commitment, covered, skus[commitment.instance_type]))
    for charge in DAILY_CHARGES:
        if charge.provider == provider:
            rows.extend(_daily_rows(ctx, charge, factor))
    rows.extend(_monthly_extras(ctx, rows, factor))
    return rows
