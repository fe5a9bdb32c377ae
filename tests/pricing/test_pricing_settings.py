"""Pricing settings that cannot break the pages (issue 27, item 3).

Every setting has bounds; the settings form and `PATCH /api/v1/pricing-settings/` both go
through the model's validation and refuse absurd values with a message naming the setting; a
value stored past the checks (before they existed, or by hand) is replaced by its default where
it is used, with a warning; and no stored setting makes a pricing page answer 500.

Data: the four golden runs of tests/pricing_golden.py."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from finops.attribution.models import RunCost
from finops.audit.models import AuditEvent
from finops.org.models import Profile, Team
from finops.pricing.models import PricingAssumptions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]

ABSURD = {"pue": "-1", "spot_price_ratio": "5", "recommendation_percentile": "200",
          "node_capex": "-300000"}  # fmt: skip


def _finance() -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


def _lead(slug: str) -> User:
    user = User.objects.create_user("lead-x", password="pw-123456789")
    Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD).teams.add(
        Team.objects.get(slug=slug)
    )
    return user


def _form_data(client: Client) -> dict[str, Any]:
    """What the settings page posts back unchanged: every input's initial value."""
    form = client.get("/pricing/settings/").context["form"]
    return {name: ("" if field.initial is None else field.initial)
            for name, field in form.fields.items()}  # fmt: skip


def test_the_form_refuses_absurd_settings_naming_each_and_stores_nothing(
    client: Client, priced_month: None
) -> None:
    client.force_login(_finance())
    before = PricingAssumptions.current()
    page = client.post("/pricing/settings/", {**_form_data(client), **ABSURD})
    assert page.status_code == 200
    errors = page.context["form"].errors
    assert set(ABSURD) <= set(errors)
    text = page.content.decode()
    assert "PUE (facility power / IT power) must be between 1.0 and 3.0." in text
    assert "Spot price ratio must be between 0 and 1." in text
    assert "Recommendation percentile must be between 1 and 99." in text
    assert "Node capex must be between 0 and 100000000." in text
    after = PricingAssumptions.current()
    assert (after.pue, after.spot_price_ratio, after.node_capex) == (
        before.pue, before.spot_price_ratio, before.node_capex,
    )  # fmt: skip


def test_the_form_has_an_input_per_figure_and_saves_them(
    client: Client, priced_month: None
) -> None:
    client.force_login(_finance())
    page = client.get("/pricing/settings/").content.decode()
    # No raw JSON: a number per committed term, lines for the bands; money with its currency.
    assert "Committed price / on demand, 1 year, no upfront" in page
    assert "Node capex (USD per node)" in page
    assert "Staff per node-month (USD)" in page
    assert "{" not in page.split("<form", 1)[1].split("</form>", 1)[0]
    data = {**_form_data(client), "reserved_1y_no_upfront": "0.65",
            "interruption_bands": "b = 0.073\n>20% = 0.3", "family_bands": "p5 = >20%",
            "notice_aws": "120", "pue": "1.25"}  # fmt: skip
    assert client.post("/pricing/settings/", data).status_code == 302
    stored = PricingAssumptions.current()
    assert stored.reserved_ratios["1y_no_upfront"] == "0.65"
    assert stored.interruption_bands == {"b": "0.073", ">20%": "0.3"}
    assert stored.family_bands == {"p5": ">20%"}
    assert stored.pue == Decimal("1.25")
    event = AuditEvent.objects.get(action="pricing_assumptions.update")
    assert event.details["pue"] == ["1.50", "1.25"]


def test_a_family_band_must_name_a_band(client: Client, priced_month: None) -> None:
    client.force_login(_finance())
    data = {**_form_data(client), "family_bands": "p5 = nonsense", "interruption_bands": "b = x"}
    page = client.post("/pricing/settings/", data)
    assert page.status_code == 200
    assert "Interruption bands: b must be a number between 0 and 1." in page.content.decode()
    data = {**_form_data(client), "family_bands": "p5 = nonsense"}
    text = client.post("/pricing/settings/", data).content.decode()
    assert "Family bands: p5 names band &#x27;nonsense&#x27;; the bands are b." in text


def test_the_api_refuses_what_the_form_refuses_and_only_finance_writes(
    priced_month: None,
) -> None:
    api = APIClient()
    api.force_authenticate(_lead("od"))
    assert api.get("/api/v1/pricing-settings/").status_code == 200
    assert api.patch("/api/v1/pricing-settings/", {"pue": "1.2"}, format="json").status_code == 403
    api.force_authenticate(_finance())
    # In JSON a count is a number and money or a ratio a decimal string (finops.api.fields).
    absurd = {**ABSURD, "recommendation_percentile": 200}
    refused = api.patch("/api/v1/pricing-settings/", absurd, format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert set(body) == set(ABSURD)
    assert body["pue"] == ["PUE (facility power / IT power) must be between 1.0 and 3.0."]
    assert PricingAssumptions.current().pue == Decimal("1.5")
    bad_json = {"reserved_ratios": {"1y_no_upfront": "2"}, "currency": "dollars"}
    body = api.patch("/api/v1/pricing-settings/", bad_json, format="json").json()
    assert body["reserved_ratios"] == [
        "Committed price ratios: missing 1y_all_upfront, 3y_no_upfront, 3y_all_upfront."
    ]
    assert "Currency must be an ISO 4217 code such as USD." in body["currency"]
    # Found by the API fuzz test: a null JSON setting is refused, never stored as NULL.
    nulls = api.patch("/api/v1/pricing-settings/", {"family_bands": None}, format="json")
    assert nulls.json() == {"family_bands": ["Family bands: entries of name = value, not None."]}
    assert api.patch("/api/v1/pricing-settings/", {"nope": 1}, format="json").json() == {
        "nope": ["Not a pricing setting."]
    }
    assert api.patch("/api/v1/pricing-settings/", {"pue": 1.2}, format="json").json() == {
        "pue": ['Must be a decimal string of ASCII digits, e.g. "1950.00".']
    }
    saved = api.patch("/api/v1/pricing-settings/", {"pue": "1.2", "gpus_per_node": 4},
                      format="json")  # fmt: skip
    assert saved.status_code == 200, saved.json()
    assert saved.json()["pue"] == "1.20"
    assert (PricingAssumptions.current().pue, PricingAssumptions.current().gpus_per_node) == (
        Decimal("1.2"), 4,
    )  # fmt: skip


def test_a_stored_absurd_setting_is_replaced_by_its_default_and_said_so(
    client: Client, priced_month: None
) -> None:
    PricingAssumptions.objects.filter(pk=1).update(
        pue=Decimal("-1"), spot_price_ratio=Decimal("5"), recommendation_percentile=200,
        node_capex=Decimal("-300000"), gpus_per_node=0, interruption_bands=[1, 2],
    )  # fmt: skip
    client.force_login(_finance())
    page = client.get("/pricing/?month=2025-06&team=cud")
    assert page.status_code == 200
    comparison = page.context["comparisons"][0]
    warnings = comparison["assumptions"]["warnings"]
    assert any(w.startswith("The stored pue (Decimal('-1.00')) is refused") for w in warnings)
    # The defaults stand in: PUE 1.4, 8 GPUs per node, 300,000 capex: never a negative cost.
    assert comparison["assumptions"]["on_prem"]["pue"] == "1.4"
    assert Decimal(comparison["on_prem"]["cost"]) > 0
    assert "The stored pue" in page.content.decode()
    settings_page = client.get("/pricing/settings/").content.decode()
    assert 'data-testid="assumption-warnings"' in settings_page


# Any value each column can hold (on PostgreSQL too: within the column's digits), in and out
# of bounds; JSON settings of any shape.
def _decimal(digits: int, places: int) -> st.SearchStrategy[Decimal]:
    limit = Decimal(10) ** (digits - places) - Decimal(1).scaleb(-places)
    return st.decimals(min_value=-limit, max_value=limit, places=places)


def _text(size: int) -> st.SearchStrategy[str]:
    # No NUL: PostgreSQL's JSON refuses it.
    return st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=size)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | _text(5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text(6), inner, max_size=3),
    max_leaves=6,
).filter(lambda value: value is not None)  # the columns are NOT NULL: None is not storable
_shares = st.dictionaries(
    st.sampled_from(["b", ">20%", "<5%", ""]),
    st.one_of(st.decimals(-2, 2, places=3).map(str), _json),
    max_size=3,
)
_settings = st.fixed_dictionaries(
    {
        "spot_price_ratio": _decimal(6, 4),
        "checkpoint_interval_minutes": _decimal(8, 2),
        "restart_minutes": _decimal(8, 2),
        "utilisation_window_days": st.integers(0, 2**31 - 1),
        "recommendation_percentile": st.integers(0, 32767),
        "node_capex": _decimal(16, 2),
        "amortisation_months": st.integers(0, 2**31 - 1),
        "gpus_per_node": st.integers(0, 32767),
        "watts_per_gpu": _decimal(8, 1),
        "pue": _decimal(4, 2),
        "price_per_kwh": _decimal(10, 4),
        "rack_per_node_month": _decimal(12, 2),
        "network_per_node_month": _decimal(12, 2),
        "staff_per_node_month": _decimal(12, 2),
        "interruption_bands": st.one_of(_shares, _json),
        "family_bands": st.one_of(st.dictionaries(_text(4), st.sampled_from(
            ["b", ">20%", "x"]), max_size=2), _json),
        "default_band": st.sampled_from(["b", ">20%", "", "zz"]),
        "notice_seconds": st.one_of(st.dictionaries(st.sampled_from(["aws", "gcp"]),
                                                    st.integers(-5, 10**6)), _json),
        "reserved_ratios": st.one_of(
            st.fixed_dictionaries({k: st.decimals(-1, 3, places=2).map(str) for k in (
                "1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront")}),
            _json),
        "currency": st.sampled_from(["USD", "EUR", "usd", "", "XY"]),
    }
)  # fmt: skip


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stored=_settings)
def test_no_stored_setting_makes_a_pricing_page_fail(
    client: Client, priced_month: None, stored: dict[str, Any]
) -> None:
    if not User.objects.filter(username="fin").exists():
        _finance()
    client.force_login(User.objects.get(username="fin"))
    PricingAssumptions.objects.filter(pk=1).update(**stored)
    run = RunCost.objects.get(run_id="cud-run")
    for url in (
        "/pricing/?month=2025-06&team=cud",
        "/pricing/settings/",
        "/teams/cud/?month=2025-06",
        "/runs/cud/cud-run/?month=2025-06",
        "/api/v1/pricing-comparison/?month=2025-06",
        f"/api/v1/runs/{run.pk}/pricing/",
        "/api/v1/pricing-settings/",
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, stored)


def test_a_stored_default_band_outside_the_stored_bands_falls_back_with_them(
    priced_month: None,
) -> None:
    # Found by the property test: bands {"b": ...} with default band "zz". The default band's
    # default (">20%") is not one of the stored bands, so both go back to their defaults.
    PricingAssumptions.objects.filter(pk=1).update(default_band="zz", family_bands={"p5": "x"})
    row = PricingAssumptions.current()
    warnings = row.usable()
    assert (row.default_band, row.family_bands) == (">20%", {})
    assert row.interruption_bands[">20%"] == "0.25"
    assert len(warnings) == 3
