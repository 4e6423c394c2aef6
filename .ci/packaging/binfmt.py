"""What an executable is, from its header: format, architecture, that it is an executable,
and whether it is static (ELF) or signed (Mach-O; Apple silicon requires it). Checks it
against the Rust target it was built for.

Usage: binfmt.py FILE TARGET [VERSION]
  prints e.g. `ELF 64-bit x86_64 executable, static, 9.8 MB, says 0.1.0 (commit 0123456789ab,
  x86_64-unknown-linux-musl)`; exits 1 on a mismatch. With VERSION, the binary must hold the
  line `--version` prints for VERSION and TARGET (a binary that cannot run here cannot be asked).

For the targets whose binaries cannot run here (macOS; aarch64 Linux without an emulator):
the install test (.ci/dist) checks what it can read.
"""

import re
import struct
import sys

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "aarch64"}
PE_MACHINES = {0x8664: "x86_64", 0xAA64: "aarch64"}


def elf(data: bytes) -> tuple:
    if data[4] != 2 or data[5] != 1:
        return ("ELF (not 64-bit little-endian)", None, None, None)
    e_type, machine = struct.unpack_from("<HH", data, 16)
    # ET_EXEC, or ET_DYN with an entry point (a static-pie); a shared library has neither.
    kind = "executable" if e_type == 2 or (e_type == 3 and struct.unpack_from("<Q", data, 24)[0]) else f"e_type {e_type}"
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    kinds = {struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)}
    # PT_INTERP (3): a dynamic loader is needed. PT_DYNAMIC (2) alone is a static-pie.
    static = 3 not in kinds
    return (f"ELF 64-bit {kind}", ELF_MACHINES.get(machine, hex(machine)), "static" if static else "dynamic (needs a loader)", None)


LC_CODE_SIGNATURE, LC_VERSION_MIN_MACOSX, LC_BUILD_VERSION, LC_MAIN = 0x1D, 0x24, 0x32, 0x80000028


def macho(data: bytes) -> tuple:
    cpu, _subtype, filetype, ncmds = struct.unpack_from("<IIII", data, 4)
    kind = "executable" if filetype == 2 else f"filetype {filetype}"  # MH_EXECUTE
    commands, at, minos = set(), 32, None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        commands.add(cmd)
        if cmd in (LC_VERSION_MIN_MACOSX, LC_BUILD_VERSION):
            # version: xxxx.yy.zz nibbles; LC_BUILD_VERSION has the platform first.
            v = struct.unpack_from("<I", data, at + (12 if cmd == LC_BUILD_VERSION else 8))[0]
            minos = f"{v >> 16}.{(v >> 8) & 0xFF}"
        at += size
    if LC_MAIN not in commands:
        kind += " without an entry point (LC_MAIN)"
    signed = "signed" if LC_CODE_SIGNATURE in commands else "unsigned"
    return (f"Mach-O 64-bit {kind}", MACHO_CPUS.get(cpu, hex(cpu)), signed, f"macOS {minos or '?'} or later")


def pe(data: bytes) -> tuple:
    at = struct.unpack_from("<I", data, 0x3C)[0]
    if data[at : at + 4] != b"PE\0\0":
        return ("MZ without PE header", None, None, None)
    machine = struct.unpack_from("<H", data, at + 4)[0]
    magic = struct.unpack_from("<H", data, at + 24)[0]
    characteristics = struct.unpack_from("<H", data, at + 22)[0]
    kind = "executable" if characteristics & 0x2 and not characteristics & 0x2000 else "not an executable image"
    return (("PE32+" if magic == 0x20B else "PE32") + f" {kind}", PE_MACHINES.get(machine, hex(machine)), None, None)


def describe(data: bytes) -> tuple:
    if data[:4] == b"\x7fELF":
        return elf(data)
    if data[:4] == b"\xcf\xfa\xed\xfe":
        return macho(data)
    if data[:2] == b"MZ":
        return pe(data)
    return ("unknown format", None, None, None)


def expected(target: str) -> tuple:
    arch = target.split("-")[0]
    if "linux" in target:
        return ("ELF 64-bit executable", arch, "static" if "musl" in target else None)
    if "apple-darwin" in target:
        # Apple silicon runs no unsigned code: the linker must have signed it (ad hoc); an
        # x86_64 binary may be unsigned.
        return ("Mach-O 64-bit executable", arch, "signed" if arch == "aarch64" else None)
    if "windows" in target:
        return ("PE32+ executable", arch, None)
    raise SystemExit(f"unknown target {target}")


def version_line(data: bytes, version: str, target: str):
    """The `--version` text the binary holds (main.rs's VERSION), or None."""
    pattern = re.escape(version).encode() + rb" \(commit [0-9a-f]{12}(?:-modified)?, " + re.escape(target).encode() + rb"\)"
    found = re.search(pattern, data)
    return found.group().decode() if found else None


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    path, target = sys.argv[1:3]
    with open(path, "rb") as f:
        data = f.read()
    got = describe(data)
    want = expected(target)
    shown = ", ".join(x for x in (got[0] + " " + str(got[1]), got[2], got[3]) if x) + f", {len(data) / 1e6:.1f} MB"
    mismatch = got[0] != want[0] or got[1] != want[1] or (want[2] is not None and got[2] != want[2])
    if mismatch:
        print(f"{path}: expected {want} for {target}, found {got[:3]}", file=sys.stderr)
    if len(sys.argv) == 4:
        line = version_line(data, sys.argv[3], target)
        if line is None:
            print(f"{path}: holds no `{sys.argv[3]} (commit …, {target})` version line", file=sys.stderr)
            mismatch = True
        else:
            shown += f", says {line}"
    print(shown)
    if mismatch:
        sys.exit(1)


if __name__ == "__main__":
    main()
