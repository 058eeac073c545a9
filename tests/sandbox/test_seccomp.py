"""The seccomp filter, evaluated instruction by instruction for both architectures it
knows (a classic-BPF interpreter below), and refused for real inside both runners."""

from __future__ import annotations

import errno
import json
import platform
import struct

import pytest

from sandbox import seccomp
from sandbox.python import python_request
from sandbox.runner import run_blocking
from tests.sandbox.sandboxkit import RUNNERS, runner_named

ALLOW, KILL = seccomp.RET_ALLOW, seccomp.RET_KILL_PROCESS
X86, ARM = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_AARCH64


def evaluate(program: bytes, arch: int, nr: int, *args: int) -> int:
    """Runs the filter on one system call, as the kernel would."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    code = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    pc, a = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == seccomp.LD_W_ABS:
            a = struct.unpack_from("<I", data, k)[0]
        elif op == seccomp.RET_K:
            return k
        elif op == seccomp.JA:
            pc += k
        elif op in (seccomp.JEQ_K, seccomp.JGE_K, seccomp.JSET_K):
            taken = {seccomp.JEQ_K: a == k, seccomp.JGE_K: a >= k, seccomp.JSET_K: bool(a & k)}[op]
            pc += jt if taken else jf
        else:
            raise AssertionError(f"unknown instruction {op:#x}")
        pc += 1


def refused(result: int, code: int = errno.EPERM) -> bool:
    return result == seccomp.RET_ERRNO | code


@pytest.mark.parametrize("arch, column", [(X86, 0), (ARM, 1)])
@pytest.mark.parametrize(
    "name", ["ptrace", "mount", "bpf", "keyctl", "perf_event_open", "unshare", "setns", "process_vm_readv"]
)
def test_the_calls_the_brief_names_are_refused_on_both_architectures(arch: int, column: int, name: str) -> None:
    program = seccomp.bpf(seccomp.rules())
    assert refused(evaluate(program, arch, seccomp.SYSCALLS[name][column]))


@pytest.mark.parametrize("arch, column, read", [(X86, 0, 0), (ARM, 1, 63)])
def test_ordinary_calls_are_allowed(arch: int, column: int, read: int) -> None:
    program = seccomp.bpf(seccomp.rules())
    assert evaluate(program, arch, read, 0, 0, 0) == ALLOW
    clone = seccomp.SYSCALLS["clone"][column]
    assert evaluate(program, arch, clone, 0x01200011) == ALLOW  # what fork() passes
    assert refused(evaluate(program, arch, clone, 0x10000000 | 0x01200011))  # with CLONE_NEWUSER
    assert refused(evaluate(program, arch, seccomp.SYSCALLS["clone3"][column]), errno.ENOSYS)
    ioctl = seccomp.SYSCALLS["ioctl"][column]
    assert evaluate(program, arch, ioctl, 1, 0x5401) == ALLOW  # TCGETS
    assert refused(evaluate(program, arch, ioctl, 1, seccomp.TIOCSTI))
    assert refused(evaluate(program, arch, ioctl, 1, (1 << 32) | seccomp.TIOCSTI))  # the kernel reads an int


@pytest.mark.parametrize("arch, column", [(X86, 0), (ARM, 1)])
def test_ip_sockets_only_with_loopback(arch: int, column: int) -> None:
    socket_nr = seccomp.SYSCALLS["socket"][column]
    closed, loopback = seccomp.bpf(seccomp.rules()), seccomp.bpf(seccomp.rules(loopback=True))
    for domain in (seccomp.AF_INET, seccomp.AF_INET6):
        assert refused(evaluate(closed, arch, socket_nr, domain, 1), errno.EACCES)
        assert evaluate(loopback, arch, socket_nr, domain, 1) == ALLOW
    assert evaluate(closed, arch, socket_nr, 1, 1) == ALLOW  # AF_UNIX


def test_other_architectures_and_abis_are_killed() -> None:
    program = seccomp.bpf(seccomp.rules())
    assert evaluate(program, 0x40000003, 0) == KILL  # i386 calls on x86_64
    assert evaluate(program, X86, seccomp.X32_SYSCALL_BIT | 0) == KILL  # the x32 ABI
    assert evaluate(program, 0xC00000F3, 0) == KILL  # riscv64


def test_the_docker_profile_holds_the_same_rules() -> None:
    profile = json.loads(seccomp.docker_profile(seccomp.rules()))
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    refused_names = {name for entry in profile["syscalls"] if "args" not in entry for name in entry["names"]}
    assert {"ptrace", "mount", "bpf", "keyctl", "perf_event_open", "unshare", "setns"} <= refused_names
    clone = [e for e in profile["syscalls"] if e["names"] == ["clone"]]
    assert {e["args"][0]["value"] for e in clone} == {1 << i for i in range(32) if seccomp.CLONE_NAMESPACES >> i & 1}


CALLS = """
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
numbers = json.loads(sys.argv[1])
found = {}
for name, nr in numbers.items():
    result = libc.syscall(ctypes.c_long(nr), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))
    found[name] = ctypes.get_errno() if result == -1 else 0
print(json.dumps(found))
"""


@pytest.mark.parametrize("name", RUNNERS)
def test_inside_each_runner_the_calls_are_refused(name: str) -> None:
    column = {"x86_64": 0, "aarch64": 1}[platform.machine()]
    wanted = ["ptrace", "mount", "bpf", "keyctl", "perf_event_open", "unshare", "setns"]
    numbers = {call: seccomp.SYSCALLS[call][column] for call in wanted}
    result = run_blocking(runner_named(name), python_request(("-c", CALLS, json.dumps(numbers))))
    assert result.ok, result.stderr
    assert json.loads(result.stdout) == {call: errno.EPERM for call in wanted}
