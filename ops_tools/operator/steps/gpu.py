"""Step 1: the NVIDIA GPUs of this machine (lspci, nvidia-smi), or --no-gpu recorded."""

from __future__ import annotations

from ops_tools.errors import OpsError
from ops_tools.operator import gpu_probe
from ops_tools.operator.context import Context
from ops_tools.operator.steps import Outcome

NAME = "gpu"
TITLE = "GPU detection"


def run(ctx: Context) -> Outcome:
    found = gpu_probe.detect(ctx.options.no_gpu)
    if found.no_gpu:
        detail = "no GPU (--no-gpu: test network only; the worker serves without one)"
    else:
        names = ", ".join(f"{g.name} ({g.memory_mib} MiB)" for g in found.gpus)
        detail = (f"{len(found.gpus)} GPU(s): {names}; driver {found.gpus[0].driver_version};"
                  f" confidential computing {found.cc_mode}")
    return Outcome(detail, {"gpu": found.to_json()})


def check(ctx: Context) -> str | None:
    """The GPUs (or --no-gpu) found now are the journaled ones: lspci and nvidia-smi are cheap."""
    try:
        now = gpu_probe.detect(ctx.options.no_gpu).to_json()
    except OpsError as exc:
        return f"GPU detection gives another answer now ({exc})"
    if now != ctx.facts.get("gpu"):
        return "the GPUs found now differ from the journal's (another server, board or driver)"
    return None
