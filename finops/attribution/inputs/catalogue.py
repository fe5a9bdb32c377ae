"""Instance-type catalogue: how many GPUs of which model a billed node has (DESIGN section 5.1).

Lookups are case-insensitive and ignore Azure's `Standard_` prefix (bills write
`Standard_ND96isr_H100_v5`, the design and the docs often write `ND96isr_H100_v5`). SKU strings
that embed the type (AWS usage types such as `USE1-BoxUsage:p5.48xlarge`) match on a token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuSpec:
    count: int
    model: str


_A100 = "A100 40GB"
_A100_80 = "A100 80GB"
_H100 = "H100"
_H200 = "H200"

# Keys are normalised (see normalise_instance_type).
_CATALOGUE: dict[str, GpuSpec] = {
    # AWS
    "p4d.24xlarge": GpuSpec(8, _A100),
    "p4de.24xlarge": GpuSpec(8, _A100_80),
    "p5.48xlarge": GpuSpec(8, _H100),
    "p5e.48xlarge": GpuSpec(8, _H200),
    "p5en.48xlarge": GpuSpec(8, _H200),
    # GCP
    "a2-highgpu-1g": GpuSpec(1, _A100),
    "a2-highgpu-2g": GpuSpec(2, _A100),
    "a2-highgpu-4g": GpuSpec(4, _A100),
    "a2-highgpu-8g": GpuSpec(8, _A100),
    "a2-megagpu-16g": GpuSpec(16, _A100),
    "a2-ultragpu-1g": GpuSpec(1, _A100_80),
    "a2-ultragpu-2g": GpuSpec(2, _A100_80),
    "a2-ultragpu-4g": GpuSpec(4, _A100_80),
    "a2-ultragpu-8g": GpuSpec(8, _A100_80),
    "a3-highgpu-8g": GpuSpec(8, _H100),
    "a3-megagpu-8g": GpuSpec(8, _H100),
    "a3-ultragpu-8g": GpuSpec(8, _H200),
    # Azure (without the Standard_ prefix, lower case)
    "nd96asr_v4": GpuSpec(8, _A100),
    "nd96amsr_a100_v4": GpuSpec(8, _A100_80),
    "nd96isr_h100_v5": GpuSpec(8, _H100),
    "nd96isr_h200_v5": GpuSpec(8, _H200),
    # CoreWeave
    "gd-8xh100ib-i128": GpuSpec(8, _H100),
    "gd-8xh200ib-i128": GpuSpec(8, _H200),
}

_AZURE_PREFIX = "standard_"
# Separators seen around an instance type inside SKU / usage-type strings. Dots, dashes and
# underscores are part of type names, so they are not separators.
_TOKEN_SPLIT = re.compile(r"[\s:/,;|()\[\]]+")


def normalise_instance_type(value: str) -> str:
    key = value.strip().lower()
    if key.startswith(_AZURE_PREFIX):
        key = key[len(_AZURE_PREFIX) :]
    return key


def gpu_spec(instance_type: str) -> GpuSpec | None:
    """The GPUs of an instance type, or None when the type is not a known GPU type."""
    if not instance_type:
        return None
    return _CATALOGUE.get(normalise_instance_type(instance_type))


def gpu_spec_in_text(text: str) -> GpuSpec | None:
    """Like gpu_spec, but also finds a type embedded as a token in a longer SKU string."""
    if not text:
        return None
    spec = gpu_spec(text)
    if spec is not None:
        return spec
    for token in _TOKEN_SPLIT.split(text):
        spec = gpu_spec(token)
        if spec is not None:
            return spec
    return None


def line_gpu_spec(
    *,
    x_instance_type: str = "",
    x_gpu_count: int | None = None,
    x_gpu_model: str = "",
    sku_id: str = "",
    resource_type: str = "",
) -> GpuSpec | None:
    """GPUs per node for a billed line item.

    Order: a GPU count the parser derived from the bill itself (x_gpu_count > 0) wins; then the
    catalogue by x_instance_type; then the catalogue by SKU id, then by resource type.
    """
    if x_gpu_count:
        catalogued = gpu_spec(x_instance_type)
        model = x_gpu_model or (catalogued.model if catalogued else "")
        return GpuSpec(int(x_gpu_count), model)
    for text in (x_instance_type, sku_id, resource_type):
        spec = gpu_spec_in_text(text)
        if spec is not None:
            return spec
    return None
