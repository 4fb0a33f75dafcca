"""The Debian engines' bundle for an air-gapped host: the script on PATH and which files of
an unpacked root file system are its libraries (the bundle itself is built and run on real
hosts in tests/test_cluster_ssh.py)."""

from __future__ import annotations

import os
import subprocess

from k8sdds.images.debian_engines import PROGRAMS, libraries, wrapper


def test_the_wrapper_runs_the_program_with_the_bundles_libraries_first(tmp_path):
    ddsperf = next(p for p in PROGRAMS if p.name == "ddsperf")
    text = wrapper(ddsperf, "arm64")
    assert text.startswith("#!/bin/sh\n")
    assert 'd="${0%/*}/debian-arm64"' in text
    assert 'exec "$d/bin/ddsperf" "$@"' in text
    # run by /bin/sh with a stand-in program: what it is given, and with which library path
    (tmp_path / "debian-arm64" / "bin").mkdir(parents=True)
    stand_in = tmp_path / "debian-arm64" / "bin" / "ddsperf"
    stand_in.write_text('#!/bin/sh\necho "$LD_LIBRARY_PATH|$*"\n')
    stand_in.chmod(0o755)
    script = tmp_path / "ddsperf"
    script.write_text(text)
    script.chmod(0o755)
    out = subprocess.run(["ddsperf", "-D", "3", "pub", "arg with space"], capture_output=True,
                         text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin",
                                         "LD_LIBRARY_PATH": "/old"}).stdout
    assert out == f"{tmp_path}/debian-arm64/lib:/old|-D 3 pub arg with space\n"


def test_libraries_are_the_shared_objects_of_the_library_folders(tmp_path):
    multiarch = tmp_path / "usr/lib/aarch64-linux-gnu"
    (multiarch / "libddsc0debian").mkdir(parents=True)
    (tmp_path / "usr/lib/aarch64-linux-gnu/security").mkdir()
    for name in ("libddsc.so.0.10.2", "libssl.so.3", "libfoo.a", "libfoo.la", "ld-2.36.so",
                 "libddsc0debian/libdds_security_auth.so", "security/pam_unix.so"):
        (multiarch / name).write_text("")
    os.symlink("libddsc.so.0.10.2", multiarch / "libddsc.so.0debian")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/libz.so.1").write_text("")
    names = [p.name for p in libraries(tmp_path)]
    assert sorted(names) == ["libdds_security_auth.so", "libddsc.so.0.10.2",
                             "libddsc.so.0debian", "libssl.so.3", "libz.so.1"]
