"""Cell converters of the Azure cost details parser (azure_cost.py): days in both of Azure's
spellings, tags, AdditionalInfo, the VM size, region and resource name of a row.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Any

from billing_ingest.parsers.values import BadValue, cell_text, parse_json_object, parse_timestamp

_US_DATE_RE = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})(?:[ T].*)?$")
# An Azure VM size as AdditionalInfo.ServiceType writes it: Standard_ND96isr_H100_v5.
_VM_SIZE_RE = re.compile(r"^(?:Standard|Basic)_[A-Za-z0-9_]+$")
# A scale set's VM instance as AdditionalInfo.VMName writes it: <scale set name>_<instance id>.
_VMSS_INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*_\d+$")
# A VM meter name that is a size without the prefix: "ND96isr H100 v5", "D2 v3", "B1s".
_METER_SIZE_RE = re.compile(r"^[A-Z]+[0-9]+[A-Za-z0-9 ]*$")
_METER_SUFFIXES = (" Spot", " Low Priority")


def azure_day(value: object) -> date:
    """A cell holding a day: MM/DD/YYYY (EA), ISO 8601 (MCA, newer exports) or a Parquet date."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).date() if value.tzinfo else value.date()
    if isinstance(value, date):
        return value
    text = cell_text(value)
    if not text:
        raise BadValue("is empty")
    match = _US_DATE_RE.match(text)
    if match is None:
        stamp = parse_timestamp(text)
        assert stamp is not None
        return stamp.date()
    try:
        return date(int(match[3]), int(match[1]), int(match[2]))
    except ValueError:
        raise BadValue(f"{text!r} is not a valid MM/DD/YYYY date") from None


def midnight_utc(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def azure_tags(value: object) -> dict[str, str]:
    """Azure Tags: JSON, often without the outer braces; values kept as strings."""
    parsed = parse_json_object(value)
    return {str(key): "" if item is None else str(item) for key, item in parsed.items()}


def additional_info(value: object) -> dict[str, Any]:
    # Informational only: a malformed AdditionalInfo must not stop a bill from importing.
    try:
        return parse_json_object(value)
    except BadValue:
        return {}


def vm_size(info: dict[str, Any], meter_category: str, subcategory: str, name: str) -> str:
    """The VM size: AdditionalInfo first (ServiceType, VMSize, or a VMName that is a size), then
    a Virtual Machines meter naming it (MeterSubCategory "Standard_...", MeterName "D2 v3")."""
    for key in ("ServiceType", "VMSize", "VMName"):
        found = str(info.get(key) or "").strip()
        if _VM_SIZE_RE.match(found):
            return found
    if meter_category.strip().lower() != "virtual machines":
        return ""
    if _VM_SIZE_RE.match(subcategory.strip()):
        return subcategory.strip()
    # "D2 v2/DS2 v2" bills both sizes on one meter: the first names the family's base size.
    meter = name.split("/")[0].strip()
    for suffix in _METER_SUFFIXES:
        meter = meter.removesuffix(suffix)
    if _METER_SIZE_RE.match(meter):
        return "Standard_" + meter.replace(" ", "_")
    return ""


def arm_region(value: str) -> str:
    # FOCUS RegionId for Azure is the ARM name: "East US" / "EastUS" -> "eastus".
    return value.replace(" ", "").lower()


def vm_resource_name(name: str, resource_id: str, info: dict[str, Any]) -> str:
    # A scale set bills per VM instance and names it in AdditionalInfo.VMName
    # ("aks-gpupool-42850074-vmss_3"): the instance, not the whole scale set, is the resource a
    # node ran on (attribution's match_node turns it into the AKS node name).
    vm_name = str(info.get("VMName") or "").strip()
    scale_set = resource_id.rstrip("/").rsplit("/", 1)[-1]
    if (
        "/virtualmachinescalesets/" in resource_id.lower()
        and _VMSS_INSTANCE_RE.match(vm_name)
        and vm_name.lower().startswith(scale_set.lower() + "_")
    ):
        return vm_name
    if name:
        return name
    if resource_id and not resource_id.endswith("/"):
        return resource_id.rsplit("/", 1)[-1]
    return ""
