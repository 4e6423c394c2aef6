"""The packages of a release, checked against the targets built (.ci/dist matrix): for each
target, its archive, its wheel's platform tags and its npm platform package's `os`/`cpu`, all
holding the same executable; the npm launcher's optional dependencies naming exactly the
platform packages built; SHA256SUMS listing every file. These are what pip, npm and a user
checking a download decide by, and none of them needs the binary to run.

Usage: packages.py OUT_DIR VERSION TARGET...   one line per target; exits 1 on a mismatch.
"""

import hashlib
import io
import json
import sys
import tarfile
import zipfile
from pathlib import Path

# esbuild's and Biome's names (process.platform, process.arch), as .ci/dist's npm_platform.
NPM = {
    "x86_64-unknown-linux-musl": ("linux", "x64"),
    "aarch64-unknown-linux-musl": ("linux", "arm64"),
    "x86_64-apple-darwin": ("darwin", "x64"),
    "aarch64-apple-darwin": ("darwin", "arm64"),
    "x86_64-pc-windows-gnu": ("win32", "x64"),
}


def wheel_platforms_ok(target: str, platforms: set) -> bool:
    """The platform tags pip on the target's machines accepts, and no other."""
    arch = target.split("-")[0]
    if target.endswith("-linux-musl"):
        # Static: one wheel for glibc (manylinux, both spellings) and musl (Alpine) systems.
        return platforms == {f"manylinux2014_{arch}", f"manylinux_2_17_{arch}", f"musllinux_1_2_{arch}"}
    if target.endswith("-apple-darwin"):
        mac_arch = {"x86_64": "x86_64", "aarch64": "arm64"}[arch]
        return len(platforms) == 1 and all(p.startswith("macosx_") and p.endswith("_" + mac_arch) for p in platforms)
    if target == "x86_64-pc-windows-gnu":
        return platforms == {"win_amd64"}
    return False


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main():
    out, version, *targets = sys.argv[1:]
    out = Path(out)
    failed = []
    sums = {}
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.lstrip("*")] = digest
    for name, digest in sums.items():
        if sha256((out / name).read_bytes()) != digest:
            failed.append(f"SHA256SUMS: {name} does not match")
    listed = {p.relative_to(out).as_posix() for p in out.glob("*") if p.is_file() and p.name != "SHA256SUMS"}
    listed |= {p.relative_to(out).as_posix() for p in out.glob("*/*") if p.is_file()}
    for name in sorted(listed - set(sums)):
        failed.append(f"SHA256SUMS does not list {name}")

    for target in targets:
        exe = "mcpwall.exe" if "windows" in target else "mcpwall"
        problems = []
        # The archive's executable is the reference the other two must equal.
        stem = f"mcpwall-{version}-{target}"
        archive = out / (stem + (".zip" if "windows" in target else ".tar.gz"))
        binary = None
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as z:
                binary = z.read(f"{stem}/{exe}")
        else:
            with tarfile.open(archive) as t:
                member = t.getmember(f"{stem}/{exe}")
                if not member.mode & 0o111:
                    problems.append("the archive's binary is not executable")
                binary = t.extractfile(member).read()
        if archive.name not in sums:
            problems.append(f"{archive.name} not in SHA256SUMS")

        wheels = [w for w in (out / "wheels").glob(f"mcpwall-{version}-*.whl") if wheel_platforms_ok(target, set(w.stem.split("-")[-1].split(".")))]
        if len(wheels) != 1:
            problems.append(f"{len(wheels)} wheels with {target}'s platform tags in {out / 'wheels'}")
            wheel_desc = "?"
        else:
            wheel = wheels[0]
            interpreter, abi, platform = wheel.stem.split("-")[-3:]
            with zipfile.ZipFile(wheel) as z:
                meta = z.read(f"mcpwall-{version}.dist-info/WHEEL").decode()
                inner = next((z.read(n) for n in z.namelist() if n.endswith(f".data/scripts/{exe}")), None)
            tags = {line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Tag: ")}
            if tags != {f"{interpreter}-{abi}-{p}" for p in platform.split(".")}:
                problems.append(f"{wheel.name}: its WHEEL file's tags {sorted(tags)} differ from its name")
            if (interpreter, abi) != ("py3", "none"):
                problems.append(f"{wheel.name}: tagged {interpreter}-{abi}, not py3-none (no Python code)")
            if inner != binary:
                problems.append(f"{wheel.name}: its {exe} is not the archive's")
            wheel_desc = platform

        npm_os, npm_cpu = NPM[target]
        tgz = out / "npm" / f"mcpwall-rs-{npm_os}-{npm_cpu}-{version}.tgz"
        with tarfile.open(tgz) as t:
            package = json.load(io.TextIOWrapper(t.extractfile("package/package.json")))
            packed = t.extractfile(f"package/bin/{exe}").read()
            packed_mode = t.getmember(f"package/bin/{exe}").mode
        if (package["name"], package["version"], package["os"], package["cpu"]) != (f"mcpwall-rs-{npm_os}-{npm_cpu}", version, [npm_os], [npm_cpu]):
            problems.append(f"{tgz.name}: name/version/os/cpu are {package['name']} {package['version']} {package['os']} {package['cpu']}")
        if packed != binary:
            problems.append(f"{tgz.name}: its {exe} is not the archive's")
        if npm_os != "win32" and not packed_mode & 0o111:
            problems.append(f"{tgz.name}: bin/{exe} is not executable")

        if problems:
            failed += [f"{target}: {p}" for p in problems]
        print(f"   {target}: {archive.name}, wheel {wheel_desc}, npm {package['name']} (os {npm_os}, cpu {npm_cpu}); "
              f"the same {len(binary) / 1e6:.1f} MB executable in all three" + (" — MISMATCH" if problems else ""))

    with tarfile.open(out / "npm" / f"mcpwall-rs-{version}.tgz") as t:
        launcher = json.load(io.TextIOWrapper(t.extractfile("package/package.json")))
    optional = launcher.get("optionalDependencies", {})
    wanted = {f"mcpwall-rs-{NPM[t][0]}-{NPM[t][1]}": version for t in targets}
    if optional != wanted:
        failed.append(f"the launcher's optionalDependencies are {optional}, not {wanted}")
    print(f"   launcher mcpwall-rs: optionalDependencies {', '.join(sorted(optional))}; "
          f"SHA256SUMS lists {len(sums)} files")
    for problem in failed:
        print(f"   MISMATCH: {problem}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
