"""Dense peak tensor throughput per GPU model and precision, for MFU (DESIGN section 9).

Always the dense figure: NVIDIA's datasheets print the tensor-core rates "with sparsity" (2:4
structured sparsity, twice the dense rate) and mark them with an asterisk; training does not run
sparse, so MFU against them would be halved. Each figure names its source. SXM / HGX parts (what
the clouds' 8-GPU instances carry); a PCIe or NVL part has lower clocks and is not listed here.
A model or precision not in the table has no MFU (null), never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

TERA = Decimal(10) ** 12


@dataclass(frozen=True, slots=True)
class PeakFlops:
    gpu: str
    dtype: str
    tflops: Decimal
    source: str

    @property
    def flops(self) -> Decimal:
        return self.tflops * TERA


_H100_SOURCE = (
    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM), dense = the '*with sparsity' figure / 2"
)
_H200_SOURCE = (
    "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM), dense = the '*with sparsity' figure / 2"
)
_A100_SOURCE = "NVIDIA A100 Tensor Core GPU datasheet (A100 SXM), dense figures"
_B200_SOURCE = "NVIDIA HGX B200 datasheet (per GPU), dense = the '*with sparsity' figure / 2"
_L40S_SOURCE = "NVIDIA L40S GPU datasheet, dense = the '*with sparsity' figure / 2"
_L4_SOURCE = "NVIDIA L4 Tensor Core GPU datasheet, dense = the '*with sparsity' figure / 2"
_A10_SOURCE = "NVIDIA A10 Tensor Core GPU datasheet, dense = the '*with sparsity' figure / 2"

_TABLE: dict[str, tuple[str, dict[str, str]]] = {
    # family: (source, dtype -> dense TFLOPS)
    "H100": (_H100_SOURCE, {"bf16": "989", "fp16": "989", "fp8": "1979", "tf32": "494.5",
                            "fp32": "67"}),
    "H200": (_H200_SOURCE, {"bf16": "989", "fp16": "989", "fp8": "1979", "tf32": "494.5",
                            "fp32": "67"}),
    "A100": (_A100_SOURCE, {"bf16": "312", "fp16": "312", "tf32": "156", "fp32": "19.5"}),
    "B200": (_B200_SOURCE, {"bf16": "2250", "fp16": "2250", "fp8": "4500", "tf32": "1100",
                            "fp32": "75"}),
    "L40S": (_L40S_SOURCE, {"bf16": "362", "fp16": "362", "fp8": "733", "tf32": "183",
                            "fp32": "91.6"}),
    "L4": (_L4_SOURCE, {"bf16": "121", "fp16": "121", "fp8": "242.5", "tf32": "60",
                        "fp32": "30.3"}),
    "A10": (_A10_SOURCE, {"bf16": "125", "fp16": "125", "tf32": "62.5", "fp32": "31.2"}),
}  # fmt: skip

PEAKS: dict[tuple[str, str], PeakFlops] = {
    (gpu, dtype): PeakFlops(gpu, dtype, Decimal(tflops), source)
    for gpu, (source, rates) in _TABLE.items()
    for dtype, tflops in rates.items()
}

# Longest first, so "L40S" is not read as "L4", nor "H100" inside a longer name wrongly.
_FAMILIES = sorted(_TABLE, key=len, reverse=True)
_TOKEN = re.compile(r"[A-Z0-9]+")


def gpu_family(model: str) -> str | None:
    """The table's family of a GPU model as bills and catalogues spell it ("H100",
    "A100 80GB", "A100-80GB", "NVIDIA H100 80GB HBM3", "h100"); None when unknown. A10G (AWS
    g5) is a variant with its own, unpublished rates: unknown, not A10."""
    tokens = _TOKEN.findall(model.upper())
    for family in _FAMILIES:
        if family in tokens:
            return family
    return None


def peak_flops(model: str, dtype: str) -> PeakFlops | None:
    family = gpu_family(model)
    if family is None:
        return None
    return PEAKS.get((family, dtype))
