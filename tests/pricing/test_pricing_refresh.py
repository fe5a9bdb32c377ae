"""refresh_prices (issue 13): AWS (Price List API from a local server, EC2 spot from moto), Azure
(Retail Prices API, recorded pages served by `responses`), GCP (a saved skus.list response).
Expected figures are those of the recorded files (see their READMEs), worked by hand."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path
from urllib.parse import unquote

import pytest
import responses
from django.core.management import CommandError, call_command
from moto import mock_aws

from finops.pricing import prices
from finops.pricing.models import InstancePrice, SkuPrice
from tests.recorded_gcp_catalog import catalog_sku

pytestmark = pytest.mark.django_db
RECORDED = Path(__file__).parent.parent / "recorded"


def refresh(*args: str) -> str:
    out = StringIO()
    call_command("refresh_prices", *args, stdout=out)
    return out.getvalue()


def stored(provider: str) -> dict[str, tuple[Decimal, str]]:
    return {
        row.kind: (row.hourly, row.source)
        for row in InstancePrice.objects.filter(provider=provider)
    }


class _PricingApi(BaseHTTPRequestHandler):
    """Answers GetProducts with the recorded pages: page 2 when the request carries its
    NextToken. Records the filters it was sent."""

    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        page = 2 if body.get("NextToken") == "page-2" else 1
        data = (RECORDED / "aws_pricing" / f"get_products_p5_page{page}.json").read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pricing_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    _PricingApi.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PricingApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_aws_on_demand_reserved_and_spot_are_stored_with_their_source(pricing_api: str) -> None:
    with mock_aws():
        output = refresh(
            "--provider", "aws", "--instance-type", "p5.48xlarge", "--region", "us-east-1",
            "--endpoint-url", pricing_api,
        )  # fmt: skip
    figures = stored("aws")
    # Page 1 offers 55.04 on demand, page 2 60.00: the lower is the price one can buy at.
    assert figures["on_demand"] == (Decimal("55.04"), "AWS Price List API (get_products)")
    assert figures["1y_no_upfront"][0] == Decimal("40")
    # 525600 upfront over the 26280 hours of three years, plus 0 an hour.
    assert figures["3y_all_upfront"][0] == Decimal("20")
    # The Convertible 3yr term (30) is not a Standard term: not stored.
    assert "3y_no_upfront" not in figures
    # moto's spot history: 0.00001 in each zone of us-east-1, so the mean is 0.00001.
    assert figures["spot"] == (Decimal("0.00001"), "EC2 describe_spot_price_history")
    # Both recorded pages were read, with the filters that pick Linux, shared tenancy.
    assert len(_PricingApi.requests) == 2
    sent = {f["Field"]: f["Value"] for f in _PricingApi.requests[0]["Filters"]}
    assert sent["instanceType"] == "p5.48xlarge"
    assert sent["operatingSystem"] == "Linux"
    assert sent["regionCode"] == "us-east-1"
    assert sent["tenancy"] == "Shared"
    assert "4 aws prices stored for 1 type" in output
    # The comparison now prices p5.48xlarge from the refresh, the snapshot behind it.
    quote = prices.quote("aws", "p5.48xlarge", "us-east-1")
    assert quote is not None
    assert quote.on_demand == Decimal("55.04")
    assert quote.sources["on_demand"].startswith("AWS Price List API (get_products), fetched ")
    assert quote.sources["3y_no_upfront"].startswith("snapshot: ")


def _azure_pages(mock: responses.RequestsMock, second_status: int = 200) -> None:
    folder = RECORDED / "azure_retail_prices"
    page_1 = json.loads((folder / "nd96isr_h100_v5_eastus_page1.json").read_text())
    page_2 = json.loads((folder / "nd96isr_h100_v5_eastus_page2.json").read_text())
    mock.add(
        "GET", "https://prices.azure.com:443/api/retail/prices", json=page_2,
        status=second_status,
        match=[responses.matchers.query_param_matcher({"$skip": "100"}, strict_match=False)],
    )  # fmt: skip
    mock.add("GET", "https://prices.azure.com/api/retail/prices", json=page_1)


def test_azure_retail_prices_follow_next_page_link() -> None:
    with responses.RequestsMock() as mock:
        _azure_pages(mock)
        refresh("--provider", "azure", "--instance-type", "Standard_ND96isr_H100_v5")
        first = str(mock.calls[0].request.url)
        calls = len(mock.calls)
    assert unquote(first).endswith(
        "?$filter=serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and "
        "armSkuName eq 'Standard_ND96isr_H100_v5'"
    )
    assert calls == 2  # page 1, then its NextPageLink
    figures = {kind: hourly for kind, (hourly, _) in stored("azure").items()}
    # Linux on demand 98.32 and spot 20; Windows (102.5) and Low Priority (19) ignored;
    # reservations per hour: 525600 / 8760 = 60, 1314000 / 26280 = 50, paid upfront or not.
    assert figures == {
        "on_demand": Decimal("98.32"), "spot": Decimal("20"),
        "1y_no_upfront": Decimal("60"), "1y_all_upfront": Decimal("60"),
        "3y_no_upfront": Decimal("50"), "3y_all_upfront": Decimal("50"),
    }  # fmt: skip
    row = InstancePrice.objects.get(provider="azure", kind="on_demand")
    assert (row.instance_type, row.region, row.currency) == ("nd96isr_h100_v5", "eastus", "USD")
    assert row.source == "Azure Retail Prices API"
    assert str(row.effective_date) == "2025-09-01"
    # The refreshed figures go in front of the snapshot's (which has no spot for this size):
    # spot ratio 20 / 98.32.
    quote = prices.quote("azure", "Standard_ND96isr_H100_v5", "eastus")
    assert quote is not None
    assert quote.ratio("spot") == Decimal("20") / Decimal("98.32")


def test_a_failed_page_stores_nothing() -> None:
    with responses.RequestsMock() as mock:
        _azure_pages(mock, second_status=500)
        with pytest.raises(CommandError, match="Azure Retail Prices API"):
            refresh("--provider", "azure", "--instance-type", "Standard_ND96isr_H100_v5")
    assert not InstancePrice.objects.exists()


def test_gcp_refresh_reads_the_cloud_catalog_response_into_sku_prices(tmp_path: Path) -> None:
    sku = catalog_sku(
        "0000-AAAA-1111",
        "Nvidia Tesla A100 GPU running in Americas",
        "GPU",
        "OnDemand",
        ("2", 933908000),
        effective="2025-11-01T00:00:00Z",
    )
    path = tmp_path / "skus.json"
    path.write_text(json.dumps({"skus": [sku]}))
    output = refresh("--provider", "gcp", "--from-file", str(path))
    assert "1 gcp price tier stored" in output
    price = SkuPrice.objects.get(sku_id="0000-AAAA-1111")
    # units + nanos / 10^9 = 2 + 0.933908.
    assert price.unit_price == Decimal("2.933908")
    assert price.gpu_model == "A100"
