"""FX rates: loading (pairs CSV, ECB history), lookup rule (newest on or before, inverse, cross
through EUR), the explicit missing-rate error, and exact half-even rounding."""

from __future__ import annotations

import datetime as dt
import zipfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from pytest_django import DjangoAssertNumQueries, Settings

from finops.currency.models import FxRate
from finops.currency.selectors import FxRateMissing, RateTable, fx_rate_for, money_round
from finops.currency.services import FxRateFileError, fx_rates_load

D = dt.date

# Two days of the ECB history, in its own layout: rates per EUR, a trailing comma on every
# line, N/A where no rate was published.
ECB_CSV = (
    "Date,USD,JPY,BGN,CYP,GBP,\n"
    "2025-09-05,1.1717,172.61,1.9558,N/A,0.86835,\n"
    "2025-09-04,1.1645,172.09,1.9558,N/A,0.86680,\n"
)


def _rate(day: dt.date, from_currency: str, to_currency: str, rate: str) -> FxRate:
    return FxRate.objects.create(
        date=day, from_currency=from_currency, to_currency=to_currency, rate=Decimal(rate)
    )


@pytest.fixture
def ecb_file(tmp_path: Path, db: None) -> Path:
    path = tmp_path / "eurofxref-hist.csv"
    path.write_text(ECB_CSV)
    return path


def test_same_currency_is_one(db: None) -> None:
    assert fx_rate_for(day=D(2025, 9, 1), from_currency="USD", to_currency="USD") == 1


def test_newest_rate_on_or_before_the_day(db: None) -> None:
    _rate(D(2025, 9, 1), "EUR", "USD", "1.10")
    _rate(D(2025, 9, 3), "EUR", "USD", "1.20")
    _rate(D(2025, 9, 10), "EUR", "USD", "1.30")
    rate = fx_rate_for
    assert rate(day=D(2025, 9, 1), from_currency="EUR", to_currency="USD") == Fraction("1.10")
    assert rate(day=D(2025, 9, 2), from_currency="EUR", to_currency="USD") == Fraction("1.10")
    assert rate(day=D(2025, 9, 3), from_currency="EUR", to_currency="USD") == Fraction("1.20")
    assert rate(day=D(2025, 9, 9), from_currency="EUR", to_currency="USD") == Fraction("1.20")
    assert rate(day=D(2026, 1, 1), from_currency="EUR", to_currency="USD") == Fraction("1.30")


def test_inverse_rate_when_only_the_inverse_exists(db: None) -> None:
    _rate(D(2025, 9, 1), "USD", "EUR", "0.9")
    rate = fx_rate_for(day=D(2025, 9, 2), from_currency="EUR", to_currency="USD")
    # Exact 1/0.9, not a rounded decimal.
    assert rate == Fraction(10, 9)


def test_newer_inverse_beats_an_older_direct_rate(db: None) -> None:
    _rate(D(2025, 8, 1), "EUR", "USD", "1.05")
    _rate(D(2025, 9, 1), "USD", "EUR", "0.8")
    assert fx_rate_for(day=D(2025, 9, 2), from_currency="EUR", to_currency="USD") == Fraction(5, 4)
    # On a tie the direct quote wins.
    _rate(D(2025, 9, 1), "EUR", "USD", "1.24")
    assert fx_rate_for(day=D(2025, 9, 2), from_currency="EUR", to_currency="USD") == Fraction(
        "1.24"
    )


def test_missing_rate_is_an_explicit_error(db: None) -> None:
    _rate(D(2025, 10, 1), "EUR", "USD", "1.10")  # after the day asked: does not count
    with pytest.raises(FxRateMissing) as caught:
        fx_rate_for(day=D(2025, 9, 30), from_currency="EUR", to_currency="USD")
    assert str(caught.value) == "no EUR\u2192USD rate on or before 2025-09-30: load FX rates"


def test_load_ecb_layout_stores_rates_per_eur(ecb_file: Path) -> None:
    result = fx_rates_load(path=ecb_file)
    assert result.layout == "ecb"
    # 2 days x 4 published currencies (CYP is N/A on both).
    assert result.rows == 8 == FxRate.objects.count()
    assert result.currencies == ("BGN", "EUR", "GBP", "JPY", "USD")
    row = FxRate.objects.get(date=D(2025, 9, 5), to_currency="USD")
    assert (row.from_currency, row.rate, row.source) == ("EUR", Decimal("1.1717"), "ecb")
    assert not FxRate.objects.filter(to_currency="CYP").exists()


def test_cross_rate_through_eur_from_the_ecb_layout(ecb_file: Path) -> None:
    fx_rates_load(path=ecb_file)
    day = D(2025, 9, 6)  # a Saturday: Friday's rates apply
    usd_jpy = fx_rate_for(day=day, from_currency="USD", to_currency="JPY")
    assert usd_jpy == Fraction("172.61") / Fraction("1.1717")
    gbp_usd = fx_rate_for(day=D(2025, 9, 4), from_currency="GBP", to_currency="USD")
    assert gbp_usd == Fraction("1.1645") / Fraction("0.86680")
    # EUR legs directly, and their inverse.
    assert fx_rate_for(day=day, from_currency="USD", to_currency="EUR") == 1 / Fraction("1.1717")
    with pytest.raises(FxRateMissing, match="no USD\u2192JPY rate on or before 2025-09-03"):
        fx_rate_for(day=D(2025, 9, 3), from_currency="USD", to_currency="JPY")


def test_load_ecb_zip(tmp_path: Path, db: None) -> None:
    archive = tmp_path / "eurofxref-hist.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("eurofxref-hist.csv", ECB_CSV)
    assert fx_rates_load(path=archive).rows == 8


def test_load_pairs_csv_and_reload_replaces(tmp_path: Path, db: None) -> None:
    path = tmp_path / "rates.csv"
    path.write_text(
        "date,from,to,rate\n2025-09-01,eur,usd,1.1000000000001\n2025-09-01,GBP,USD,1.35\n\n"
    )
    result = fx_rates_load(path=path)
    assert (result.layout, result.rows) == ("pairs", 2)
    row = FxRate.objects.get(from_currency="EUR")
    # 13 decimals kept exactly (stored with 16 places, as text on SQLite).
    assert row.rate == Decimal("1.1000000000001")
    assert row.source == "rates.csv"
    path.write_text("date,from,to,rate\n2025-09-01,EUR,USD,1.2\n")
    fx_rates_load(path=path)
    assert FxRate.objects.count() == 2
    assert FxRate.objects.get(from_currency="EUR").rate == Decimal("1.2")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("date,from,to,rate\n2025-09-01,EUR,USD,abc\n", "line 3: not a number"),
        ("date,from,to,rate\n2025-09-01,EUR,USD,-1\n", "line 3: a rate must be a positive number"),
        ("date,from,to,rate\n2025-13-01,EUR,USD,1\n", "line 3: not a date"),
        ("date,from,to,rate\n2025-09-01,EURO,USD,1\n", "line 3: not an ISO 4217"),
        ("date,from,to,rate\n2025-09-01,USD,USD,1\n", "line 3: a rate from USD to itself"),
        ("when,what\n2025-09-01,1\n", "header must be"),
    ],
)
def test_bad_file_loads_nothing(tmp_path: Path, db: None, body: str, message: str) -> None:
    path = tmp_path / "rates.csv"
    # A good first row: the bad one after it must stop the whole file.
    lines = body.splitlines()
    if lines[0] == "date,from,to,rate":
        lines.insert(1, "2025-08-01,EUR,USD,1.1")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FxRateFileError, match=message.replace("(", r"\(")):
        fx_rates_load(path=path)
    assert FxRate.objects.count() == 0


def test_command_loads_and_reports(ecb_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("load_fx_rates", str(ecb_file))
    out = capsys.readouterr().out
    assert "8 rates (ecb) from 2025-09-04 to 2025-09-05" in out
    with pytest.raises(CommandError, match="no such file"):
        call_command("load_fx_rates", str(ecb_file.parent / "absent.csv"))


def test_rate_table_reads_a_span_in_one_query(
    ecb_file: Path, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    fx_rates_load(path=ecb_file)
    with django_assert_num_queries(1):
        table = RateTable.load(
            currencies={"USD", "JPY", "GBP"}, first_day=D(2025, 9, 5), last_day=D(2025, 9, 30)
        )
    # The span starts on a quoted day; lookups later in it need no more queries.
    for day in (D(2025, 9, 5), D(2025, 9, 20)):
        assert table.rate(day=day, from_currency="GBP", to_currency="JPY") == Fraction(
            "172.61"
        ) / Fraction("0.86835")


def test_money_round_is_half_even_once() -> None:
    assert money_round(Fraction(25, 10**13)) == Decimal("0.000000000002")  # 2.5e-12 -> 2e-12
    assert money_round(Fraction(35, 10**13)) == Decimal("0.000000000004")
    assert money_round(Fraction(-25, 10**13)) == Decimal("-0.000000000002")
    assert money_round(Fraction(10, 9)) == Decimal("1.111111111111")
    # Past 28 digits (a sum of converted amounts can be), still every digit: Decimal's default
    # context would cut the last one.
    assert money_round(Fraction(10000000000000200000000000001, 10**12)) == Decimal(
        "10000000000000200.000000000001"
    )


def test_money_round_of_a_decimal_is_the_fractions_to_the_digit() -> None:
    # Decimals (the amounts statements sum without a rate) round in decimal, not through a
    # Fraction: the same value and the same 12 places, half even, no negative zero.
    cases = {
        "0.0000000000025": "0.000000000002",  # half to even: down
        "0.0000000000035": "0.000000000004",  # half to even: up
        "-0.0000000000025": "-0.000000000002",
        "-0.0000000000001": "0.000000000000",  # rounds to zero: not "-0E-12"
        "-0": "0.000000000000",
        "1234567890123456.123456789012": "1234567890123456.123456789012",  # 28 digits, exact
        "12.5": "12.500000000000",
    }
    for given, expected in cases.items():
        # as_tuple: the sign, the digits and the exponent, not only the value.
        assert money_round(Decimal(given)).as_tuple() == Decimal(expected).as_tuple(), given
        assert money_round(Fraction(Decimal(given))).as_tuple() == Decimal(expected).as_tuple()


def test_rate_table_includes_the_newest_rate_before_the_span(
    db: None, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    _rate(D(2025, 7, 1), "EUR", "USD", "1.01")
    _rate(D(2025, 8, 20), "EUR", "USD", "1.02")  # newest before the span
    _rate(D(2025, 9, 10), "EUR", "USD", "1.03")
    _rate(D(2025, 10, 1), "EUR", "USD", "1.04")  # after the span: not read
    _rate(D(2025, 8, 1), "GBP", "EUR", "1.15")  # a pair quoted only before the span
    with django_assert_num_queries(1):
        table = RateTable.load(
            currencies={"EUR", "USD", "GBP"}, first_day=D(2025, 9, 1), last_day=D(2025, 9, 30)
        )
    assert table.dates[("EUR", "USD")] == [D(2025, 8, 20), D(2025, 9, 10)]
    assert table.rate(day=D(2025, 9, 1), from_currency="EUR", to_currency="USD") == Fraction("1.02")
    assert table.rate(day=D(2025, 9, 30), from_currency="GBP", to_currency="USD") == Fraction(
        "1.15"
    ) * Fraction("1.03")


def test_overlong_line_fails_naming_file_and_line(
    tmp_path: Path, db: None, settings: Settings
) -> None:
    settings.FINOPS_MAX_LINE_BYTES = 100
    path = tmp_path / "rates.csv"
    # Line 3 carries a 1,000-byte extra cell (extra columns are otherwise ignored).
    path.write_text(
        "date,from,to,rate,note\n2025-09-01,EUR,USD,1.1,ok\n2025-09-02,EUR,USD,1.2," + "n" * 1000
    )
    with pytest.raises(FxRateFileError, match=r"^rates\.csv: line 3: .*FINOPS_MAX_LINE_BYTES"):
        fx_rates_load(path=path)
    assert FxRate.objects.count() == 0
    # The same rows with a short note load.
    path.write_text("date,from,to,rate,note\n2025-09-01,EUR,USD,1.1,ok\n2025-09-02,EUR,USD,1.2,n\n")
    assert fx_rates_load(path=path).rows == 2


def test_overlong_line_in_the_ecb_zip_names_the_member(
    tmp_path: Path, db: None, settings: Settings
) -> None:
    settings.FINOPS_MAX_LINE_BYTES = 100
    archive = tmp_path / "eurofxref-hist.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("eurofxref-hist.csv", "Date,USD,\n2025-09-05,1.17" + "0" * 500 + ",\n")
    with pytest.raises(
        FxRateFileError, match=r"^eurofxref-hist\.zip/eurofxref-hist\.csv: line 2: "
    ):
        fx_rates_load(path=archive)
    assert FxRate.objects.count() == 0
