"""Machine fingerprints from raw probe results: what is read, which keys they give, and
which differences make two machines incomparable."""

from __future__ import annotations

import pytest

from pytest_llmperf.engines import fingerprint
from pytest_llmperf.engines.fingerprint import Probe, differences, from_probe, machine_key

AVX_ONLY = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx fma f16c\n"
)
AMX = (
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n"
    "flags\t\t: sse4_2 avx avx2 avx512f avx512bw amx_bf16 amx_tile amx_int8\n"
)
A100_X8 = "\n".join(["NVIDIA A100-SXM4-80GB, 81920, 550.54.15"] * 8)
A100_40 = "NVIDIA A100-SXM4-40GB, 40960, 550.54.15"
NVIDIA_HEADER = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |"
NPU_SMI = """\
+------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc2                 Version: 23.0.rc2                                       |
+---------------------------+---------------+----------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)     Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)  |
+===========================+===============+==============================================+
| 0     910B3               | OK            | 93.6        40          0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0    3162 / 65536         |
+===========================+===============+==============================================+
| 1     910B3               | OK            | 91.2        39          0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0    3160 / 65536         |
+===========================+===============+==============================================+
"""


def cpu_probe(cpuinfo: str = AMX, cores: int = 2, **extra: object) -> Probe:
    return Probe(arch="x86_64", cpuinfo=cpuinfo, affinity_cores=cores, memory_kib=24 << 20, **extra)  # type: ignore[arg-type]


def test_avx_only_and_amx_cpus_get_different_keys() -> None:
    avx = from_probe(cpu_probe(AVX_ONLY))
    amx = from_probe(cpu_probe(AMX))
    assert (avx.cpu, avx.isa, avx.cores, avx.memory_gib) == ("AMD EPYC 7B13", "avx", 2, 24.0)
    assert amx.isa == "amx"
    assert machine_key(avx) == "cpu-avx-2c"
    assert machine_key(amx) == "cpu-amx-2c"


@pytest.mark.parametrize(
    ("flags", "level"),
    [
        ("sse4_2 avx avx2", "avx2"),
        ("avx avx2 avx512f", "avx512"),
        ("sse4_2", "sse4"),
        ("fp asimd evtstrm", "neon"),
        ("fpu", "baseline"),
    ],
)
def test_isa_level_is_the_fastest_present(flags: str, level: str) -> None:
    assert fingerprint.isa_level(flags) == level


def test_cgroup_quota_limits_the_usable_cores() -> None:
    # A container on a 64-core host with a 1.5-CPU quota runs on 2 cores' worth, not 64.
    machine = from_probe(cpu_probe(cores=64, cgroup_cpus=1.5))
    assert machine.cores == 2
    assert machine_key(machine) == "cpu-amx-2c"


def test_nvidia_gpus_name_count_memory_driver_and_cuda() -> None:
    machine = from_probe(cpu_probe(nvidia_query=A100_X8, nvidia_header=NVIDIA_HEADER))
    assert machine.accelerator == "NVIDIA A100-SXM4-80GB"
    assert (machine.accelerator_count, machine.accelerator_memory_gib) == (8, 80)
    assert (machine.driver, machine.runtime) == ("550.54.15", "cuda 12.4")
    assert machine_key(machine) == "a100-80gb-x8"
    record = machine.as_dict()
    assert record["key"] == "a100-80gb-x8"
    assert record["accelerator_count"] == 8


def test_ascend_npus_from_npu_smi() -> None:
    machine = from_probe(cpu_probe(npu_info=NPU_SMI))
    assert machine.accelerator == "Ascend 910B3"
    assert (machine.accelerator_count, machine.accelerator_memory_gib) == (2, 64)
    assert machine.driver == "23.0.rc2"
    assert machine_key(machine) == "910b-64gb-x2"


def test_cpu_isa_difference_is_named() -> None:
    recorded = from_probe(cpu_probe(AMX)).as_dict()
    found = differences(recorded, from_probe(cpu_probe(AVX_ONLY)))
    assert "CPU vector ISA: amx recorded, avx here" in found
    assert "CPU model: Intel(R) Xeon(R) Processor recorded, AMD EPYC 7B13 here" in found


# Two CPU generations behind one masked model name, as two KVM guests showed them: the
# family-26 one served the embedded model's sharegpt-bs4 pairs about a third faster.
EPYC_MASKED = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
    "model name\t: AMD EPYC\nflags\t\t: avx2 avx512f avx512_bf16\n"
)
ZEN4_GUEST = EPYC_MASKED.format(family=25, model=17)
ZEN5_GUEST = EPYC_MASKED.format(family=26, model=2)
ARM = "processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n"


def test_cpu_generation_is_read_from_family_and_model_or_the_arm_part() -> None:
    assert from_probe(cpu_probe(ZEN5_GUEST)).cpu_generation == "family 26 model 2"
    assert from_probe(cpu_probe(ARM)).cpu_generation == "implementer 0x41 part 0xd4f"
    assert from_probe(cpu_probe(AVX_ONLY)).cpu_generation is None
    recorded = from_probe(cpu_probe(ZEN4_GUEST)).as_dict()
    assert recorded["cpu_generation"] == "family 25 model 17"
    assert "cpu_generation" not in from_probe(cpu_probe(AVX_ONLY)).as_dict()


def test_same_model_name_other_cpu_generation_is_named_with_the_same_key() -> None:
    zen4, zen5 = from_probe(cpu_probe(ZEN4_GUEST)), from_probe(cpu_probe(ZEN5_GUEST))
    assert machine_key(zen4) == machine_key(zen5) == "cpu-avx512-2c"
    assert differences(zen4.as_dict(), zen5) == [
        "CPU family and model number: family 25 model 17 recorded, family 26 model 2 here"
    ]
    assert differences(zen5.as_dict(), from_probe(cpu_probe(ZEN5_GUEST))) == []


def test_an_entry_recorded_before_cpu_generation_still_compares() -> None:
    recorded = from_probe(cpu_probe(ZEN4_GUEST)).as_dict()
    del recorded["cpu_generation"]
    assert differences(recorded, from_probe(cpu_probe(ZEN5_GUEST))) == []


def test_gpu_memory_difference_is_named_and_the_host_cpu_is_not_compared() -> None:
    recorded = from_probe(cpu_probe(AMX, nvidia_query=A100_X8)).as_dict()
    other_host = from_probe(cpu_probe(AVX_ONLY, cores=96, nvidia_query=A100_X8))
    assert differences(recorded, other_host) == []
    smaller = from_probe(cpu_probe(AMX, nvidia_query=A100_40))
    assert differences(recorded, smaller) == [
        "accelerator: NVIDIA A100-SXM4-80GB recorded, NVIDIA A100-SXM4-40GB here",
        "accelerator count: 8 recorded, 1 here",
        "accelerator memory (GiB each): 80 recorded, 40 here",
    ]


def test_equal_machines_and_informative_fields() -> None:
    recorded = from_probe(cpu_probe()).as_dict()
    # Memory and versions are reported, not compared: a bigger host is the same CPU class.
    recorded.update(memory_gib=512.0, plugin="0.0.1")
    assert differences(recorded, from_probe(cpu_probe())) == []


def test_describe_is_one_readable_line() -> None:
    text = fingerprint.describe(from_probe(cpu_probe(AVX_ONLY)).as_dict())
    assert text == "cpu-avx-2c: AMD EPYC 7B13, avx, 2 cores, 24.0 GiB"


def test_describe_names_the_cpu_generation_when_known() -> None:
    text = fingerprint.describe(from_probe(cpu_probe(ZEN5_GUEST)).as_dict())
    assert text == "cpu-avx512-2c: AMD EPYC (family 26 model 2), avx512, 2 cores, 24.0 GiB"


def test_this_machine_reads_without_failing() -> None:
    machine = fingerprint.from_probe(fingerprint.probe())
    assert machine.cores >= 1
    assert machine.isa in {level for level, _ in fingerprint.ISA_LEVELS} | {"baseline"}
    assert machine_key(machine)
