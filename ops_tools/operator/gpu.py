"""Pure parsers of what ``lspci`` and ``nvidia-smi`` print; running them is ``gpu_probe``.

- ``lspci -nn``: ``01:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 PCIe] [10de:2331]
  (rev a1)``;
- ``lspci -mm -nn``: ``01:00.0 "3D controller [0302]" "NVIDIA Corporation [10de]" "GH100 [H100
  PCIe] [2331]" -ra1 "NVIDIA Corporation [10de]" "Device [1626]"`` (quoted fields; ``-mm``
  alone prints the same without the bracketed ids);
- ``nvidia-smi --query-gpu=... --format=csv``: a header naming the fields (with units such as
  ``memory.total [MiB]``), then one line per GPU;
- ``nvidia-smi conf-compute -f``: ``CC status: ON`` (drivers with confidential computing).

A GPU is a PCI device of vendor 0x10de in class 03xx (display: VGA 0300, 3D controller 0302);
NVIDIA's audio functions and bridges on the same boards are not GPUs.
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from dataclasses import asdict, dataclass
from typing import Any

NVIDIA_VENDOR = "10de"
DISPLAY_CLASS_PREFIX = "03"
# The fields the probe asks nvidia-smi for, in this order.
QUERY_FIELDS = ("index", "pci.bus_id", "name", "memory.total", "driver_version")


@dataclass(frozen=True)
class PciDevice:
    slot: str  # bus:device.function, with the domain when lspci printed one
    class_name: str
    class_id: str | None  # "0302"; None when lspci printed no ids
    vendor_name: str
    vendor_id: str | None
    device_name: str
    device_id: str | None

    @property
    def is_nvidia_gpu(self) -> bool:
        nvidia = self.vendor_id == NVIDIA_VENDOR if self.vendor_id else \
            self.vendor_name.lower().startswith("nvidia")
        if self.class_id:
            display = self.class_id.startswith(DISPLAY_CLASS_PREFIX)
        else:
            display = bool(re.search(r"vga|3d controller|display", self.class_name, re.I))
        return nvidia and display


@dataclass(frozen=True)
class GpuInfo:
    index: int
    pci_bus_id: str
    name: str
    memory_mib: int | None
    driver_version: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_ID = re.compile(r"^(?P<name>.*?)\s*\[(?P<id>[0-9a-f]{4})\]$")
_NN_LINE = re.compile(
    r"^(?P<slot>\S+)\s+(?P<cls>.+?)\s+\[(?P<cls_id>[0-9a-f]{4})\]:\s+(?P<rest>.*?)"
    r"\s+\[(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})\](?:\s+\(rev [0-9a-f]+\))?"
    r"(?:\s+\(prog-if [^)]*\))?\s*$"
)


def _split_id(field: str) -> tuple[str, str | None]:
    match = _ID.match(field.strip())
    return (match["name"], match["id"]) if match else (field.strip(), None)


def parse_lspci_nn(text: str) -> list[PciDevice]:
    """Every device line of ``lspci -nn``; lines in another shape are skipped."""
    devices = []
    for line in text.splitlines():
        match = _NN_LINE.match(line.strip())
        if not match:
            continue
        rest = match["rest"]
        # "NVIDIA Corporation GH100 [H100 PCIe]": the vendor is not delimited in -nn output;
        # the well-known vendor string is split off, anything else stays the device name.
        vendor_name, _, device_name = rest.partition(" Corporation ")
        if device_name:
            vendor_name += " Corporation"
        else:
            vendor_name, device_name = "", rest
        devices.append(PciDevice(match["slot"], match["cls"], match["cls_id"], vendor_name,
                                 match["vendor"], device_name, match["device"]))
    return devices


def parse_lspci_mm(text: str) -> list[PciDevice]:
    """Every device of ``lspci -mm`` or ``lspci -mm -nn`` (quoted fields, optional ids)."""
    devices = []
    for line in text.splitlines():
        try:
            fields = shlex.split(line)
        except ValueError:
            continue
        positional = [f for f in fields if not re.match(r"^-[rp]\S*$", f)]
        if len(positional) < 4:
            continue
        slot, cls, vendor, device = positional[:4]
        cls_name, cls_id = _split_id(cls)
        vendor_name, vendor_id = _split_id(vendor)
        device_name, device_id = _split_id(device)
        devices.append(PciDevice(slot, cls_name, cls_id, vendor_name, vendor_id, device_name,
                                 device_id))
    return devices


def nvidia_gpus(devices: list[PciDevice]) -> list[PciDevice]:
    return [d for d in devices if d.is_nvidia_gpu]


def _header_key(column: str) -> str:
    """``memory.total [MiB]`` -> ``memory.total``."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", column.strip())


def _mib(value: str) -> int | None:
    match = re.match(r"^\s*(\d+)\s*(MiB)?\s*$", value)
    return int(match[1]) if match else None


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv`` (header line, units kept)."""
    rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    if not rows:
        return []
    header = [_header_key(c) for c in rows[0]]
    missing = [f for f in QUERY_FIELDS if f not in header]
    if missing:
        raise ValueError(f"nvidia-smi CSV has no column {missing[0]!r} (header: {rows[0]})")
    gpus = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        values = dict(zip(header, (v.strip() for v in row), strict=True))
        gpus.append(GpuInfo(
            index=int(values["index"]),
            pci_bus_id=values["pci.bus_id"],
            name=values["name"],
            memory_mib=_mib(values["memory.total"]),
            driver_version=values["driver_version"],
        ))
    return gpus


def parse_cc_status(text: str) -> str:
    """``on``, ``off`` or ``unknown`` from ``nvidia-smi conf-compute -f``."""
    match = re.search(r"CC status:\s*(ON|OFF)", text, re.I)
    return match[1].lower() if match else "unknown"


def same_bus(pci_slot: str, nvidia_bus_id: str) -> bool:
    """lspci's ``01:00.0`` (or ``0000:01:00.0``) against nvidia-smi's ``00000000:01:00.0``."""
    def tail(v: str) -> str:
        return v.lower().split(":", v.count(":") - 1)[-1] if v.count(":") >= 2 else v.lower()
    return tail(pci_slot) == tail(nvidia_bus_id)
