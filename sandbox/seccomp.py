"""The system calls a sandboxed program is refused, as one list of rules compiled two ways:
a classic-BPF program for bubblewrap's `--seccomp FD`, and a profile for Docker.

The rest is allowed (a deny list): what keeps a program in is the minimal root, the
namespaces, the unprivileged uid without capabilities and the limits; these rules take
away the kernel interfaces that could reach past them (tracing, mounting, new
namespaces, keyrings, BPF, perf, module loading, reading another process's memory,
keystroke injection) and, unless a run asks for loopback, IP sockets.

The BPF program checks the architecture first (x86_64 and aarch64, by their audit
numbers; any other, including 32-bit calls on x86_64 and the x32 ABI, kills the
process), then the call number, then for a few rules one argument. Arguments that the
kernel reads as an int (the socket domain, an ioctl's request) are compared on their
low 32 bits only, as the kernel reads them.
"""

from __future__ import annotations

import errno
import json
import struct
from dataclasses import dataclass

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

# seccomp return values
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# classic BPF opcodes
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
JA = 0x05  # BPF_JMP | BPF_JA: an unconditional jump, its offset in k (32 bits)
RET_K = 0x06  # BPF_RET | BPF_K

# offsets in struct seccomp_data
NR, ARCH = 0, 4


def arg_low(index: int) -> int:
    return 16 + 8 * index  # little-endian: the low word of args[index] comes first


CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
AF_INET, AF_INET6, AF_PACKET = 2, 10, 17

# name: (x86_64 number, aarch64 number); None where the call does not exist.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "mount_setattr": (442, 442),
    "unshare": (272, 97),
    "setns": (308, 268),
    "clone": (56, 220),
    "clone3": (435, 435),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "userfaultfd": (323, 282),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "syslog": (103, 116),
    "iopl": (172, None),
    "ioperm": (173, None),
    "lookup_dcookie": (212, 18),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "ioctl": (16, 29),
    "socket": (41, 198),
}


@dataclass(frozen=True)
class SyscallRule:
    """Refuse `syscall` with `errno`: always, or when argument `arg` equals `value`
    ("eq") or has any of the bits of `value` set ("any")."""

    syscall: str
    errno: int = errno.EPERM
    arg: int | None = None
    op: str = "eq"
    value: int = 0


ALWAYS = [SyscallRule(name) for name in SYSCALLS if name not in ("clone", "clone3", "ioctl", "socket")]
RULES: list[SyscallRule] = [
    *ALWAYS,
    # glibc falls back to clone when clone3 is not there; clone's flags can then be read.
    SyscallRule("clone3", errno.ENOSYS),
    SyscallRule("clone", arg=0, op="any", value=CLONE_NAMESPACES),
    SyscallRule("ioctl", arg=1, value=TIOCSTI),
    SyscallRule("ioctl", arg=1, value=TIOCLINUX),
]
NO_NETWORK: list[SyscallRule] = [
    SyscallRule("socket", errno.EACCES, arg=0, value=domain) for domain in (AF_INET, AF_INET6, AF_PACKET)
]


def rules(loopback: bool = False) -> list[SyscallRule]:
    return RULES if loopback else [*RULES, *NO_NETWORK]


def bpf(rule_list: list[SyscallRule]) -> bytes:
    """The filter as bwrap's --seccomp reads it: struct sock_filter instructions."""
    x86 = _arch_block(rule_list, 0, x32_check=True)
    arm = _arch_block(rule_list, 1, x32_check=False)
    program = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        (JA, 0, 0, len(x86)),  # not x86_64: past its block, the architecture still loaded
        *x86,
        (JEQ_K, 1, 0, AUDIT_ARCH_AARCH64),
        (RET_K, 0, 0, RET_KILL_PROCESS),
        *arm,
    ]
    return b"".join(struct.pack("<HBBI", *ins) for ins in program)


def _arch_block(rule_list: list[SyscallRule], column: int, x32_check: bool) -> list[tuple[int, int, int, int]]:
    block: list[tuple[int, int, int, int]] = []
    if x32_check:
        block += [(LD_W_ABS, 0, 0, NR), (JGE_K, 0, 1, X32_SYSCALL_BIT), (RET_K, 0, 0, RET_KILL_PROCESS)]
    for rule in rule_list:
        number = SYSCALLS[rule.syscall][column]
        if number is None:
            continue
        refuse = (RET_K, 0, 0, RET_ERRNO | rule.errno)
        if rule.arg is None:
            block += [(LD_W_ABS, 0, 0, NR), (JEQ_K, 0, 1, number), refuse]
        else:
            test = JSET_K if rule.op == "any" else JEQ_K
            block += [
                (LD_W_ABS, 0, 0, NR),
                (JEQ_K, 0, 3, number),
                (LD_W_ABS, 0, 0, arg_low(rule.arg)),
                (test, 0, 1, rule.value),
                refuse,
            ]
    block.append((RET_K, 0, 0, RET_ALLOW))
    return block


def docker_profile(rule_list: list[SyscallRule]) -> str:
    """The same rules as a Docker seccomp profile (JSON). libseccomp compares whole
    64-bit arguments; "any" bits becomes one rule per bit."""
    entries = []
    for rule in rule_list:
        base = {"names": [rule.syscall], "action": "SCMP_ACT_ERRNO", "errnoRet": rule.errno}
        if rule.arg is None:
            entries.append(base)
        elif rule.op == "any":
            for bit in (1 << i for i in range(32) if rule.value >> i & 1):
                entries.append(
                    {**base, "args": [{"index": rule.arg, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}]}
                )
        else:
            entries.append({**base, "args": [{"index": rule.arg, "value": rule.value, "op": "SCMP_CMP_EQ"}]})
    return json.dumps(
        {
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
            "syscalls": entries,
        }
    )
