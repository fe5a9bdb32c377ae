"""FX rates: one row per (date, from, to). 1 `from_currency` = `rate` `to_currency`."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from finops.core.money import MoneyField

# A rate keeps 16 decimals: ECB publishes 4-5 significant decimals, but a CSV may carry a
# small quote such as JPY->USD 0.006790123456789. Stored as text on SQLite (exact), like money.
RATE_DIGITS = 32
RATE_PLACES = 16
RATE_QUANTUM = Decimal(1).scaleb(-RATE_PLACES)


class FxRate(models.Model):
    date = models.DateField()
    from_currency = models.CharField(max_length=3, help_text="ISO 4217 code, e.g. EUR")
    to_currency = models.CharField(max_length=3, help_text="ISO 4217 code, e.g. USD")
    rate = MoneyField(
        max_digits=RATE_DIGITS,
        decimal_places=RATE_PLACES,
        help_text="1 unit of from_currency in to_currency",
    )
    source = models.CharField(max_length=100, blank=True, help_text="ecb, or the file loaded")
    loaded_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "FX rate"
        ordering = ["-date", "from_currency", "to_currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["date", "from_currency", "to_currency"], name="fxrate_unique_day_pair"
            ),
            models.CheckConstraint(
                condition=~models.Q(from_currency=models.F("to_currency")),
                name="fxrate_distinct_currencies",
            ),
        ]
        indexes = [models.Index(fields=["from_currency", "to_currency", "date"])]

    def __str__(self) -> str:
        return f"{self.date} 1 {self.from_currency} = {self.rate} {self.to_currency}"
