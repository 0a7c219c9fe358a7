#!/usr/bin/env python3
"""Give a local image the architecture of its contents: `set-image-arch.py NAME ARCH`.

`docker import --platform linux/arm64` records the architecture only where the daemon honours
the flag (Docker 20.10 from Debian's packages does not: the image says amd64 and holds arm64
files), and then `docker build --platform linux/arm64` cannot use it as a base: it looks for an
arm64 variant and tries to pull. This rewrites the image's config (architecture, os) through
`docker save` / `docker load`; the layers are unchanged. Uses only the docker CLI."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import tempfile


def main(name: str, arch: str) -> int:
    current = subprocess.run(
        ["docker", "image", "inspect", name, "--format", "{{.Architecture}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if current == arch:
        return 0
    with tempfile.TemporaryFile() as saved, tempfile.TemporaryFile() as fixed:
        subprocess.run(["docker", "save", name], stdout=saved, check=True)
        saved.seek(0)
        with tarfile.open(fileobj=saved) as src, tarfile.open(fileobj=fixed, mode="w") as dst:
            manifest = json.load(src.extractfile("manifest.json"))
            configs = {m["Config"] for m in manifest}
            for member in src.getmembers():
                data = src.extractfile(member) if member.isfile() else None
                if member.name in configs:
                    config = json.load(data)
                    config["architecture"], config["os"] = arch, "linux"
                    raw = json.dumps(config).encode()
                    member.size = len(raw)
                    data = io.BytesIO(raw)
                dst.addfile(member, data)
        fixed.seek(0)
        subprocess.run(["docker", "rmi", "-f", name], capture_output=True, check=True)
        subprocess.run(["docker", "load", "-q"], stdin=fixed, check=True, capture_output=True)
    after = subprocess.run(
        ["docker", "image", "inspect", name, "--format", "{{.Architecture}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"{name}: architecture {current} -> {after}")
    return 0 if after == arch else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
