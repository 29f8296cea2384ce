"""A small OCI image made from this machine's own files, for `walkthrough.sh --real-runtime` (the GPU machine reaches
no registry): an image layout tarball that `ctr images import` reads, one layer, tagged with every --name.

  oci_image.py --output demo.tar --name docker.m.daocloud.io/vllm/vllm-openai:latest \
      --program bash --program env ... --libraries-of /usr/local/nvidia/bin/nvidia-smi --env NVIDIA_VISIBLE_DEVICES=all
  oci_image.py --output pause.tar --name registry.k8s.io/pause:3.10.2 --file /path/to/pause:/pause --entrypoint /pause

--program NAME: the program found on PATH (or a path), at its path in the image, with the shared libraries `ldd`
names. --libraries-of PATH: only the libraries PATH needs, not PATH itself (a base image's C library: nvidia-smi
arrives with NVIDIA's CDI specs, as on a cluster, and needs the image's glibc). --file SRC:DEST: one file as is.
The folders a system image has (/etc/ld.so.conf.d, /tmp, /proc, /dev, ...) and the top-level links of a merged /usr
come along, so that NVIDIA's hooks (ldconfig in the container) and runc find what they expect.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

FOLDERS = ("etc/ld.so.conf.d", "tmp", "proc", "sys", "dev", "run", "var/run", "root", "usr/local/bin", "usr/local/nvidia")
LDD_LINE = re.compile(r"(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)")


def shared_libraries(path: str) -> list:
    """The absolute paths `ldd` lists for path (none for a static program)."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
    return [match.group(1) for line in result.stdout.splitlines() if (match := LDD_LINE.search(line.strip()))]


def resolve(program: str) -> str:
    found = program if os.sep in program else shutil.which(program)
    if not found:
        raise SystemExit(f"oci_image.py: {program} is not on PATH")
    return os.path.abspath(found)


def rootfs_entries(programs: list, libraries_of: list, files: list) -> dict:
    """Image path -> ('file', host path) | ('link', target) | ('dir', None)."""
    entries: dict = {}
    for top in ("bin", "sbin", "lib", "lib64"):   # a merged /usr: /bin -> usr/bin, as on the host
        if os.path.islink("/" + top):
            entries[top] = ("link", os.readlink("/" + top))

    def add_file(path: str) -> None:
        real = os.path.realpath(path)
        entries[real.lstrip("/")] = ("file", real)
        logical = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if logical != real:
            entries[logical.lstrip("/")] = ("link", os.path.basename(real) if os.path.dirname(real) == os.path.dirname(logical) else real)

    for program in programs:
        path = resolve(program)
        add_file(path)
        for library in shared_libraries(path):
            add_file(library)
    for path in libraries_of:
        for library in shared_libraries(path):
            add_file(library)
    for spec in files:
        source, dest = spec.split(":", 1)
        entries[dest.lstrip("/")] = ("file", source)
    for folder in FOLDERS:
        entries.setdefault(folder, ("dir", None))
    return entries


def layer_tar(entries: dict) -> bytes:
    buffer = io.BytesIO()
    mtime = int(time.time())
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        made = set()

        def parents(path: str) -> None:
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder in made or entries.get(folder, ("dir",))[0] == "link":
                    continue
                info = tarfile.TarInfo(folder)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755, mtime
                tar.addfile(info)
                made.add(folder)

        # Links of the merged /usr first, then everything beneath their targets.
        for path in sorted(entries, key=lambda p: (entries[p][0] != "link" or "/" in p, p)):
            kind, value = entries[path]
            if _under_link(path, entries):
                path = _through_links(path, entries)
            parents(path)
            if kind == "dir":
                if path not in made:
                    info = tarfile.TarInfo(path)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if path == "tmp" else 0o755, mtime
                    tar.addfile(info)
                    made.add(path)
            elif kind == "link":
                info = tarfile.TarInfo(path)
                info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, value, 0o777, mtime
                tar.addfile(info)
            else:
                info = tar.gettarinfo(value, arcname=path)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                with open(value, "rb") as handle:
                    tar.addfile(info, handle)
        ld_conf = b"include /etc/ld.so.conf.d/*.conf\n"
        for name, data in (("etc/ld.so.conf", ld_conf), ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
                           ("etc/group", b"root:x:0:\n")):
            if name not in entries:
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, mtime
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _under_link(path: str, entries: dict) -> bool:
    top = path.split("/", 1)[0]
    return "/" in path and entries.get(top, ("",))[0] == "link"


def _through_links(path: str, entries: dict) -> str:
    """bin/bash -> usr/bin/bash where bin is a link to usr/bin (a tar entry must not pass through a link)."""
    top, rest = path.split("/", 1)
    return os.path.normpath(os.path.join(os.path.dirname(top), entries[top][1], rest)).lstrip("/")


def blob(store: dict, data: bytes, media_type: str) -> dict:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    store[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def image_layout(names: list, layer: bytes, env: list, entrypoint: list, cmd: list) -> bytes:
    blobs: dict = {}
    layer_desc = blob(blobs, layer, "application/vnd.oci.image.layer.v1.tar")
    config = {"architecture": "amd64", "os": "linux",
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "config": {"Env": env, **({"Entrypoint": entrypoint} if entrypoint else {}), **({"Cmd": cmd} if cmd else {})},
              "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
              "history": [{"created_by": "tests/device/oci_image.py (files of the GPU machine itself)"}]}
    config_desc = blob(blobs, json.dumps(config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc]}
    manifest_desc = blob(blobs, json.dumps(manifest, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json")
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {**manifest_desc, "platform": {"architecture": "amd64", "os": "linux"},
         "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}
        for name in names]}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        def put(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        put("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        put("index.json", json.dumps(index, sort_keys=True).encode())
        for digest, data in blobs.items():
            put("blobs/sha256/" + digest.split(":", 1)[1], data)
    return out.getvalue()


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--name", action="append", required=True)
    parser.add_argument("--program", action="append", default=[])
    parser.add_argument("--libraries-of", action="append", default=[])
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    args = parser.parse_args(argv)
    entries = rootfs_entries(args.program, args.libraries_of, args.file)
    layer = layer_tar(entries)
    with open(args.output, "wb") as handle:
        handle.write(image_layout(args.name, layer, args.env, args.entrypoint, args.cmd))
    files = sum(1 for kind, _path in entries.values() if kind == "file")
    print(f"{args.output}: {', '.join(args.name)}: {files} files, layer {len(layer) >> 10} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
