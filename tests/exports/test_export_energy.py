"""The FOCUS export's energy columns (issue 32): x_GpuEnergyKWh, x_EnergyKWh (facility),
x_CarbonKgCO2e and x_EnergyMethod per line item, on the hand-worked scenario
fixtures/scenarios/focus-slurm-energy (README.md there): node n1 holds attempt 1 of job 301,
1.3 kWh measured; n2 attempt 2, 1.3 kWh measured; n3 job 302, 1.4 kWh estimated (4 H100 x 0.5 h x
700 W). PUE 1.135 (AWS), 369.473 g CO2e/kWh (United States, 2023).
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from finops.exports.writer import focus_month_export
from tests.conftest import SHARED_DIR
from tests.energy_inputs import energy_month

pytestmark = pytest.mark.django_db
VALIDATOR = SHARED_DIR / "tools" / "focus-validate"
PLACES = Decimal("0.000001")
ENERGY = ("x_GpuEnergyKWh", "x_EnergyKWh", "x_CarbonKgCO2e", "x_EnergyMethod")


def _export(out: Path) -> Path:
    energy_month()
    from datetime import date

    focus_month_export(month=date(2025, 6, 1), out=out)
    return out


def test_each_gpu_node_row_carries_its_jobs_energy(tmp_path: Path) -> None:
    out = _export(tmp_path / "june.csv")
    rows = {r["ResourceName"]: r for r in csv.DictReader(out.open())}
    expected = {"n1": ("1.3", "measured"), "n2": ("1.3", "measured"), "n3": ("1.4", "estimated")}
    for node, (gpu_kwh, method) in expected.items():
        row = rows[node]
        gpu = Decimal(row["x_GpuEnergyKWh"])
        assert abs(gpu - Decimal(gpu_kwh)) <= Decimal(gpu_kwh) / 100, (node, row)
        facility = (gpu * Decimal("1.135")).quantize(PLACES)
        assert Decimal(row["x_EnergyKWh"]) == facility, node
        carbon = (facility * Decimal("369.473") / 1000).quantize(PLACES)
        assert Decimal(row["x_CarbonKgCO2e"]) == carbon, node
        assert row["x_EnergyMethod"] == method
        assert "e" not in row["x_EnergyKWh"].lower()
    # Worked by hand: 1.3 x 1.135 = 1.4755 kWh; x 369.473 / 1000 = 0.5451574... kg.
    assert (rows["n1"]["x_EnergyKWh"], rows["n1"]["x_CarbonKgCO2e"]) == ("1.4755", "0.545157")
    assert (rows["n3"]["x_EnergyKWh"], rows["n3"]["x_CarbonKgCO2e"]) == ("1.589", "0.587093")
    # The rows sum to the teams' facility energy (vision 2.951, speech 1.589).
    total = sum(Decimal(r["x_EnergyKWh"]) for r in rows.values())
    assert total == Decimal("2.951") + Decimal("1.589")


def test_parquet_keeps_the_energy_as_decimals(tmp_path: Path) -> None:
    table = pq.read_table(_export(tmp_path / "june.parquet"))
    by_node = dict(
        zip(table.column("ResourceName").to_pylist(), table.column("x_EnergyKWh").to_pylist(),
            strict=True)
    )  # fmt: skip
    assert by_node["n3"] == Decimal("1.589")
    assert str(table.schema.field("x_CarbonKgCO2e").type) == "decimal128(38, 12)"


def _failures(out: Path) -> set[str]:
    run = subprocess.run(
        [str(VALIDATOR), str(out)], capture_output=True, text=True, timeout=600, check=False
    )
    if re.search(r"Total: \d+ \| Pass: \d+ \| Fail: \d+", run.stdout) is None:
        pytest.skip(f"focus-validate did not run: {run.stderr[-500:]}")
    report = Path(f"{out}.focus-report.txt").read_text()
    return set(re.findall(r"^❌ (\S+): FAIL", report, flags=re.M))


@pytest.mark.skipif(
    not VALIDATOR.exists() or shutil.which("bash") is None, reason="focus-validate is absent"
)
def test_the_energy_columns_add_no_validator_failure(tmp_path: Path) -> None:
    """The validator's verdict on the export equals its verdict on the same rows without the
    energy columns (its known defects are listed in tests/exports/test_export_focus.py)."""
    out = _export(tmp_path / "june.parquet")
    bare = tmp_path / "bare.parquet"
    table = pq.read_table(out)
    pq.write_table(table.drop_columns(list(ENERGY)), bare)
    assert _failures(out) == _failures(bare)
