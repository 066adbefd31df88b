"""Running ``lspci`` and ``nvidia-smi`` (found on PATH) and deciding what the worker has."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from ops_tools.errors import OpsError
from ops_tools.operator import gpu


@dataclass
class Detection:
    pci: list[gpu.PciDevice] = field(default_factory=list)
    gpus: list[gpu.GpuInfo] = field(default_factory=list)
    cc_mode: str = "unknown"
    no_gpu: bool = False  # --no-gpu: recorded, test network only

    def to_json(self) -> dict[str, Any]:
        return {
            "no_gpu": self.no_gpu,
            "pci_devices": [f"{d.slot} {d.device_name} [{d.vendor_id}:{d.device_id}]"
                            for d in self.pci],
            "gpus": [g.to_json() for g in self.gpus],
            "cc_mode": self.cc_mode,
        }


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    if shutil.which(argv[0]) is None:
        return None
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def detect(no_gpu: bool) -> Detection:
    """The NVIDIA GPUs of this machine, or one clear error naming what is missing."""
    if no_gpu:
        return Detection(no_gpu=True)
    lspci = _run(["lspci", "-mm", "-nn"])
    if lspci is None:
        raise OpsError("gpu: lspci not found; install pciutils (apt-get install pciutils), or"
                       " pass --no-gpu on the test network for a worker without a GPU")
    if lspci.returncode != 0:
        raise OpsError(f"gpu: lspci -mm -nn failed (exit {lspci.returncode}):"
                       f" {lspci.stderr.strip()[:200]}")
    pci = gpu.nvidia_gpus(gpu.parse_lspci_mm(lspci.stdout))
    if not pci:
        raise OpsError("gpu: no NVIDIA GPU found (lspci lists no PCI device of vendor 10de in"
                       " class 03xx); run this on the GPU server, or pass --no-gpu on the test"
                       " network for a worker without a GPU")
    smi = _run(["nvidia-smi", f"--query-gpu={','.join(gpu.QUERY_FIELDS)}", "--format=csv"])
    if smi is None or smi.returncode != 0:
        reason = "is not installed" if smi is None else "failed: " + " ".join(
            (smi.stderr or smi.stdout).split())[:200]
        raise OpsError(f"gpu: lspci lists {len(pci)} NVIDIA GPU(s) but nvidia-smi {reason};"
                       " install the NVIDIA driver (with nvidia-smi) and check it loads")
    try:
        gpus = gpu.parse_nvidia_smi_csv(smi.stdout)
    except ValueError as exc:
        raise OpsError(f"gpu: {exc}; is nvidia-smi a current NVIDIA driver's?") from None
    if not gpus:
        raise OpsError(f"gpu: lspci lists {len(pci)} NVIDIA GPU(s) but nvidia-smi reports none;"
                       " check that the driver is loaded (dmesg, lsmod | grep nvidia)")
    cc = _run(["nvidia-smi", "conf-compute", "-f"])
    cc_mode = gpu.parse_cc_status(cc.stdout) if cc is not None and cc.returncode == 0 else \
        "unknown"
    return Detection(pci=pci, gpus=gpus, cc_mode=cc_mode)
