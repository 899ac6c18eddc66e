"""Which machine measured: the fingerprint recorded beside every baseline entry.

A throughput means nothing without the machine that produced it: vLLM's CPU kernels run about
9x slower on an AVX-only CPU than on one with AVX-512 and AMX, and an A100 with 40 GB is not
an A100 with 80 GB. The gate compares a run with a baseline only when the fields that decide
speed are equal (``COMPARED_*`` below); the others are shown in reports and never compared.

Collecting is cheap and local: /proc/cpuinfo and cgroup files, ``os`` and psutil calls, and the
accelerator tools the hardware detection already runs (nvidia-smi, npu-smi). ``probe()``
gathers the raw facts; ``from_probe()`` is a pure function of them, so tests build any machine
from an injected ``Probe``.
"""

from __future__ import annotations

import math
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pytest_llmperf.engines.hardware import classify_ascend, classify_nvidia

# Vector ISA levels, fastest first, with the /proc/cpuinfo flag that proves each (x86), or the
# Arm feature. AMX and AVX-512 are what vLLM's CPU kernels use when present.
ISA_LEVELS = (
    ("amx", "amx_tile"),
    ("avx512", "avx512f"),
    ("avx2", "avx2"),
    ("avx", "avx"),
    ("sse4", "sse4_2"),
    ("sve", "sve"),
    ("neon", "asimd"),
)

# What decides comparability. On an accelerator the engine's speed is the accelerator's: the
# host CPU is reported, not compared. Without one, the CPU is the engine.
COMPARED_ACCELERATED = ("accelerator", "accelerator_count", "accelerator_memory_gib")
COMPARED_CPU_ONLY = ("arch", "cpu", "cpu_generation", "isa", "cores")
# Compared only where both entries record it: entries written before the field existed stay
# comparable with the machine that wrote them.
COMPARED_WHEN_BOTH_KNOW = frozenset({"cpu_generation"})
LABELS = {
    "arch": "architecture",
    "cpu": "CPU model",
    "cpu_generation": "CPU family and model number",
    "isa": "CPU vector ISA",
    "cores": "usable CPU cores",
    "memory_gib": "memory (GiB)",
    "accelerator": "accelerator",
    "accelerator_count": "accelerator count",
    "accelerator_memory_gib": "accelerator memory (GiB each)",
    "driver": "driver",
    "runtime": "runtime",
}


@dataclass(frozen=True)
class Probe:
    """Raw facts of a machine, as read; ``None`` where a source is missing."""

    arch: str
    cpuinfo: str = ""  # /proc/cpuinfo (Linux), or "model name: ...\nflags: ..." from sysctl
    affinity_cores: int = 1  # logical cores this process may run on
    cgroup_cpus: float | None = None  # the cgroup's CPU quota in cores, None when unlimited
    memory_kib: int | None = None
    nvidia_query: str | None = None  # nvidia-smi --query-gpu=name,memory.total,driver_version
    nvidia_header: str | None = None  # plain nvidia-smi output (the CUDA version line)
    npu_info: str | None = None  # npu-smi info


@dataclass(frozen=True)
class Fingerprint:
    arch: str
    cpu: str
    isa: str
    cores: int
    memory_gib: float | None
    # The CPU's family and model numbers ("family 26 model 2"; on Arm the implementer and
    # part): virtual machines often show one model name ("AMD EPYC") for CPU generations that
    # serve the embedded model a third apart, and these numbers tell them apart.
    cpu_generation: str | None = None
    accelerator: str | None = None  # the first device's name; mixed machines list all in notes
    accelerator_count: int = 0
    accelerator_memory_gib: int | None = None
    driver: str | None = None
    runtime: str | None = None
    versions: dict[str, str] = field(default_factory=dict)  # engine, plugin (informative)

    @property
    def compared_fields(self) -> tuple[str, ...]:
        return COMPARED_ACCELERATED if self.accelerator else COMPARED_CPU_ONLY

    def as_dict(self) -> dict[str, Any]:
        """The YAML/JSON form: a flat mapping a reviewer reads, ``key`` first."""
        out: dict[str, Any] = {"key": machine_key(self)}
        for name in ("arch", "cpu", "isa", "cores", "memory_gib"):
            out[name] = getattr(self, name)
        if self.cpu_generation:
            out["cpu_generation"] = self.cpu_generation
        if self.accelerator:
            for name in ("accelerator", "accelerator_count", "accelerator_memory_gib"):
                out[name] = getattr(self, name)
            for name in ("driver", "runtime"):
                if getattr(self, name):
                    out[name] = getattr(self, name)
        out.update(self.versions)
        return out

    def with_versions(self, **versions: str | None) -> Fingerprint:
        known = {k: v for k, v in versions.items() if v}
        return Fingerprint(**{**self.__dict__, "versions": {**self.versions, **known}})


# -- reading the machine -----------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _cgroup_cpus() -> float | None:
    """The CPU quota of this process's cgroup in cores (v2 ``cpu.max``, v1 cfs files)."""
    v2 = _read("/sys/fs/cgroup/cpu.max").split()
    if len(v2) == 2 and v2[0] != "max":
        return int(v2[0]) / int(v2[1])
    quota = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").strip()
    period = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us").strip()
    if quota.lstrip("-").isdigit() and period.isdigit() and int(quota) > 0 and int(period) > 0:
        return int(quota) / int(period)
    return None


def _affinity_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _memory_kib() -> int | None:
    # /proc/meminfo's MemTotal on Linux, hw.memsize on macOS: the values recorded before.
    try:
        return int(psutil.virtual_memory().total) // 1024
    except (OSError, RuntimeError):
        return None


def _cpuinfo() -> str:
    text = _read("/proc/cpuinfo")
    if text:
        return text
    # macOS: the same two facts from sysctl, in cpuinfo's shape.
    name = _run(["sysctl", "-n", "machdep.cpu.brand_string"]) or ""
    flags = " ".join(
        filter(
            None,
            (
                _run(["sysctl", "-n", "machdep.cpu.features"]),
                _run(["sysctl", "-n", "machdep.cpu.leaf7_features"]),
            ),
        )
    )
    return f"model name\t: {name.strip()}\nflags\t\t: {flags.lower()}\n"


def probe() -> Probe:
    """Read this machine (no network, a fraction of a second without accelerators)."""
    nvidia = _run(
        [
            "nvidia-smi",
            "--query-gpu=name,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ]
    )
    return Probe(
        arch=platform.machine().lower(),
        cpuinfo=_cpuinfo(),
        affinity_cores=_affinity_cores(),
        cgroup_cpus=_cgroup_cpus(),
        memory_kib=_memory_kib(),
        nvidia_query=nvidia,
        nvidia_header=_run(["nvidia-smi"]) if nvidia else None,
        npu_info=None if nvidia else _run(["npu-smi", "info"]),
    )


# -- from raw facts to a fingerprint -----------------------------------------------------------


def _cpuinfo_field(cpuinfo: str, *names: str) -> str:
    for name in names:
        match = re.search(rf"^{name}\s*:\s*(.+)$", cpuinfo, re.MULTILINE | re.IGNORECASE)
        if match:
            return match.group(1).strip()
    return ""


def cpu_generation(cpuinfo: str) -> str | None:
    """``family 26 model 2`` (x86) or ``implementer 0x41 part 0xd0c`` (Arm); None where
    /proc/cpuinfo does not say (macOS's sysctl summary)."""
    family, model = _cpuinfo_field(cpuinfo, "cpu family"), _cpuinfo_field(cpuinfo, "model")
    if family and model:
        return f"family {family} model {model}"
    implementer = _cpuinfo_field(cpuinfo, "CPU implementer")
    part = _cpuinfo_field(cpuinfo, "CPU part")
    if implementer and part:
        return f"implementer {implementer} part {part}"
    return None


def isa_level(flags: str) -> str:
    present = set(flags.lower().split())
    for level, flag in ISA_LEVELS:
        if flag in present:
            return level
    return "baseline"


def _accelerators_nvidia(query: str, header: str | None) -> tuple[list[str], int | None, str, str]:
    names: list[str] = []
    memory: list[int] = []
    driver = ""
    for line in query.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) >= 3 and parts[0]:
            names.append(parts[0])
            if parts[1].isdigit():
                memory.append(int(parts[1]))
            driver = parts[2]
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header or "")
    # Marketing sizes: a "80 GB" card reports 81920 MiB (or a little less): round to GiB.
    gib = round(min(memory) / 1024) if memory else None
    return names, gib, driver, f"cuda {cuda.group(1)}" if cuda else ""


def _accelerators_ascend(info: str) -> tuple[list[str], int | None, str, str]:
    names = re.findall(r"^\|\s*\d+\s+(\d{3}[A-Z0-9]*)\s", info, re.MULTILINE)
    hbm = [int(m) for m in re.findall(r"\d+\s*/\s*(\d{4,6})\s*\|?\s*$", info, re.MULTILINE)]
    version = re.search(r"Version:\s*(\S+)", info)
    gib = round(min(hbm) / 1024) if hbm else None
    return [f"Ascend {name}" for name in names], gib, version.group(1) if version else "", ""


def from_probe(raw: Probe) -> Fingerprint:
    cores = raw.affinity_cores
    if raw.cgroup_cpus is not None:
        cores = max(1, min(cores, math.ceil(raw.cgroup_cpus)))
    names: list[str] = []
    memory_each: int | None = None
    driver = runtime = ""
    if raw.nvidia_query:
        names, memory_each, driver, runtime = _accelerators_nvidia(
            raw.nvidia_query, raw.nvidia_header
        )
    elif raw.npu_info:
        names, memory_each, driver, runtime = _accelerators_ascend(raw.npu_info)
    cpu = _cpuinfo_field(raw.cpuinfo, "model name", "Model", "cpu model", "Hardware")
    return Fingerprint(
        arch=raw.arch,
        cpu=re.sub(r"\s+", " ", cpu) or "unknown",
        cpu_generation=cpu_generation(raw.cpuinfo),
        isa=isa_level(_cpuinfo_field(raw.cpuinfo, "flags", "Features")),
        cores=cores,
        memory_gib=None if raw.memory_kib is None else round(raw.memory_kib / 1024**2, 1),
        accelerator=names[0] if names else None,
        accelerator_count=len(names),
        accelerator_memory_gib=memory_each,
        driver=driver or None,
        runtime=runtime or None,
    )


_CACHED: Fingerprint | None = None


def this_machine() -> Fingerprint:
    """This machine's fingerprint, read once per process."""
    global _CACHED
    if _CACHED is None:
        _CACHED = from_probe(probe())
    return _CACHED


# -- keys and comparisons ----------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def accelerator_family(name: str) -> str:
    return classify_nvidia(name) or classify_ascend(name) or _slug(name.replace("NVIDIA", ""))


def machine_key(machine: Fingerprint) -> str:
    """A readable baseline key for the machine's class: machines that share it are expected
    to serve at the same speed (``cpu-avx512-2c``, ``a100-80gb``, ``h200-141gb-x8``)."""
    if machine.accelerator:
        key = accelerator_family(machine.accelerator)
        if machine.accelerator_memory_gib:
            key += f"-{machine.accelerator_memory_gib}gb"
        if machine.accelerator_count > 1:
            key += f"-x{machine.accelerator_count}"
        return key
    arch = "" if machine.arch in ("x86_64", "amd64") else f"-{_slug(machine.arch)}"
    return f"cpu{arch}-{machine.isa}-{machine.cores}c"


def differences(
    recorded: Mapping[str, Any], measured: Mapping[str, Any] | Fingerprint
) -> list[str]:
    """The performance-relevant fields in which two machines differ, in words
    (``CPU vector ISA: avx512 recorded, avx here``); empty when they are comparable."""
    now = measured.as_dict() if isinstance(measured, Fingerprint) else measured
    accelerated = bool(recorded.get("accelerator")) or bool(now.get("accelerator"))
    fields = COMPARED_ACCELERATED if accelerated else COMPARED_CPU_ONLY
    out = []
    for name in fields:
        before, after = recorded.get(name), now.get(name)
        if name in COMPARED_WHEN_BOTH_KNOW and not (before and after):
            continue
        if _normal(before) != _normal(after):
            out.append(f"{LABELS[name]}: {_shown(before)} recorded, {_shown(after)} here")
    return out


def differs(recorded: Mapping[str, Any] | None, measured: Mapping[str, Any] | None) -> bool:
    """Both machines known and not comparable."""
    return bool(recorded and measured and differences(recorded, measured))


def _normal(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).lower()
    if value == 0:
        return None
    return value


def _shown(value: Any) -> str:
    return "none" if value in (None, "", 0) else str(value)


def describe(machine: Mapping[str, Any]) -> str:
    """One line for reports: ``cpu-amx-2c: Intel(R) Xeon(R) Processor, amx, 2 cores, 23.4 GiB``."""
    parts = []
    if machine.get("accelerator"):
        count = machine.get("accelerator_count") or 1
        memory = machine.get("accelerator_memory_gib")
        parts.append(f"{count}x {machine['accelerator']}" + (f" {memory} GB" if memory else ""))
        parts.extend(str(machine[k]) for k in ("driver", "runtime") if machine.get(k))
    cpu = str(machine.get("cpu") or "unknown CPU")
    if machine.get("cpu_generation"):
        cpu += f" ({machine['cpu_generation']})"
    parts.append(cpu)
    if machine.get("isa"):
        parts.append(str(machine["isa"]))
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores")
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']} GiB")
    key = machine.get("key")
    return f"{key}: {', '.join(parts)}" if key else ", ".join(parts)
