"""The instance-type catalogue: GPUs per node by provider type, SKU or derived x_ fields."""

from __future__ import annotations

import pytest

from finops.attribution.inputs.catalogue import GpuSpec, gpu_spec, gpu_spec_in_text, line_gpu_spec


@pytest.mark.parametrize(
    ("instance_type", "count", "model"),
    [
        ("p4d.24xlarge", 8, "A100 40GB"),
        ("p4de.24xlarge", 8, "A100 80GB"),
        ("p5.48xlarge", 8, "H100"),
        ("p5e.48xlarge", 8, "H200"),
        ("p5en.48xlarge", 8, "H200"),
        ("a2-highgpu-1g", 1, "A100 40GB"),
        ("a2-highgpu-2g", 2, "A100 40GB"),
        ("a2-highgpu-4g", 4, "A100 40GB"),
        ("a2-highgpu-8g", 8, "A100 40GB"),
        ("a2-megagpu-16g", 16, "A100 40GB"),
        ("a2-ultragpu-1g", 1, "A100 80GB"),
        ("a2-ultragpu-8g", 8, "A100 80GB"),
        ("a3-highgpu-8g", 8, "H100"),
        ("a3-megagpu-8g", 8, "H100"),
        ("a3-ultragpu-8g", 8, "H200"),
        ("Standard_ND96asr_v4", 8, "A100 40GB"),
        ("Standard_ND96amsr_A100_v4", 8, "A100 80GB"),
        ("Standard_ND96isr_H100_v5", 8, "H100"),
        ("Standard_ND96isr_H200_v5", 8, "H200"),
        ("gd-8xh100ib-i128", 8, "H100"),
        ("gd-8xh200ib-i128", 8, "H200"),
    ],
)
def test_known_types(instance_type: str, count: int, model: str) -> None:
    assert gpu_spec(instance_type) == GpuSpec(count, model)


def test_azure_prefix_and_case_do_not_matter() -> None:
    expected = GpuSpec(8, "H100")
    for spelling in ("ND96isr_H100_v5", "standard_nd96isr_h100_v5", " STANDARD_ND96ISR_H100_V5 "):
        assert gpu_spec(spelling) == expected
    assert gpu_spec("P5.48XLARGE") == expected


def test_unknown_and_cpu_types() -> None:
    assert gpu_spec("m5.xlarge") is None
    assert gpu_spec("") is None
    # Close but different names are not guessed.
    assert gpu_spec("p5.24xlarge") is None
    assert gpu_spec("a3-highgpu-4g") is None


def test_type_embedded_in_a_sku_string() -> None:
    assert gpu_spec_in_text("USE1-BoxUsage:p4d.24xlarge") == GpuSpec(8, "A100 40GB")
    assert gpu_spec_in_text("Linux/UNIX (p5.48xlarge)") == GpuSpec(8, "H100")
    assert gpu_spec_in_text("USE1-BoxUsage:m5.large") is None


def test_line_gpu_spec_precedence() -> None:
    # A GPU count derived from the bill wins over the catalogue.
    assert line_gpu_spec(x_instance_type="p5.48xlarge", x_gpu_count=4) == GpuSpec(4, "H100")
    assert line_gpu_spec(x_gpu_count=2, x_gpu_model="L4") == GpuSpec(2, "L4")
    # Then x_instance_type, then the SKU, then the resource type.
    by_type = line_gpu_spec(x_instance_type="a3-highgpu-8g", sku_id="p4d.24xlarge")
    assert by_type is not None
    assert by_type.model == "H100"
    by_sku = line_gpu_spec(sku_id="BoxUsage:p4d.24xlarge")
    assert by_sku is not None
    assert by_sku.count == 8
    assert line_gpu_spec(resource_type="Standard_ND96asr_v4") == GpuSpec(8, "A100 40GB")
    assert line_gpu_spec(x_instance_type="m5.large", sku_id="storage") is None
