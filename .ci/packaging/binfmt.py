"""What an executable is, from its header: format, architecture and (ELF) whether it is
static. Checks it against the Rust target it was built for.

Usage: binfmt.py FILE TARGET   prints e.g. `ELF 64-bit x86_64, static`; exits 1 on a mismatch.

For the targets whose binaries cannot run here (macOS; aarch64 Linux without an emulator):
the install test (.ci/dist) checks what it can read.
"""

import struct
import sys

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "aarch64"}
PE_MACHINES = {0x8664: "x86_64", 0xAA64: "aarch64"}


def elf(data: bytes) -> tuple:
    if data[4] != 2 or data[5] != 1:
        return ("ELF (not 64-bit little-endian)", None, None)
    machine = struct.unpack_from("<H", data, 18)[0]
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    kinds = {struct.unpack_from("<I", data, phoff + i * phentsize)[0] for i in range(phnum)}
    # PT_INTERP (3): a dynamic loader is needed. PT_DYNAMIC (2) alone is a static-pie.
    static = 3 not in kinds
    return ("ELF 64-bit", ELF_MACHINES.get(machine, hex(machine)), "static" if static else "dynamic (needs a loader)")


def macho(data: bytes) -> tuple:
    cpu = struct.unpack_from("<I", data, 4)[0]
    return ("Mach-O 64-bit", MACHO_CPUS.get(cpu, hex(cpu)), None)


def pe(data: bytes) -> tuple:
    at = struct.unpack_from("<I", data, 0x3C)[0]
    if data[at : at + 4] != b"PE\0\0":
        return ("MZ without PE header", None, None)
    machine = struct.unpack_from("<H", data, at + 4)[0]
    magic = struct.unpack_from("<H", data, at + 24)[0]
    return ("PE32+" if magic == 0x20B else "PE32", PE_MACHINES.get(machine, hex(machine)), None)


def describe(data: bytes) -> tuple:
    if data[:4] == b"\x7fELF":
        return elf(data)
    if data[:4] == b"\xcf\xfa\xed\xfe":
        return macho(data)
    if data[:2] == b"MZ":
        return pe(data)
    return ("unknown format", None, None)


def expected(target: str) -> tuple:
    arch = target.split("-")[0]
    if "linux" in target:
        return ("ELF 64-bit", arch, "static" if "musl" in target else None)
    if "apple-darwin" in target:
        return ("Mach-O 64-bit", arch, None)
    if "windows" in target:
        return ("PE32+", arch, None)
    raise SystemExit(f"unknown target {target}")


def main():
    path, target = sys.argv[1:]
    with open(path, "rb") as f:
        data = f.read()
    got = describe(data)
    want = expected(target)
    shown = ", ".join(x for x in (got[0] + " " + str(got[1]), got[2]) if x)
    print(f"{shown}, {len(data) / 1e6:.1f} MB")
    mismatch = got[0] != want[0] or got[1] != want[1] or (want[2] is not None and got[2] != want[2])
    if mismatch:
        print(f"{path}: expected {want} for {target}, found {got}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
