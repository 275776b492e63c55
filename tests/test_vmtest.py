"""The pieces of `make vmtest` that run without booting a kernel: the initramfs
builder, the kernel fetcher's argument checks and the runner's refusals. The
boots themselves are tools/vmtest/run (make vmtest, .ci/run when qemu is there)."""
import gzip
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HOME = Path(__file__).resolve().parent.parent
VMTEST = HOME / "tools" / "vmtest"

needs_busybox = pytest.mark.skipif(shutil.which("busybox") is None, reason="busybox-static is not installed")


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def cpio_names(path):
    """Member names of a gzip'd newc archive (busybox cpio -t)."""
    p = subprocess.run(["busybox", "cpio", "-t"], input=gzip.decompress(Path(path).read_bytes()),
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return set(p.stdout.decode().split())


@needs_busybox
def test_initramfs_holds_init_busybox_programs_and_their_libraries(tmp_path):
    prog = shutil.which("ls")
    out = tmp_path / "i.cpio.gz"
    p = run(VMTEST / "initramfs", out, prog)
    assert p.returncode == 0, p.stderr
    names = cpio_names(out)
    assert {"init", "bin/busybox", "bin/ls", "etc/passwd"} <= names
    libs = subprocess.run(["ldd", prog], capture_output=True, text=True).stdout
    wanted = [w.lstrip("/") for line in libs.splitlines() for w in line.split() if w.startswith("/")]
    assert any("ld-linux" in w for w in wanted)
    for lib in wanted:
        assert lib in names, f"{lib} missing from the initramfs"


@needs_busybox
@pytest.mark.parametrize("args, message", [
    ([], "usage: tools/vmtest/initramfs"),
    (["/nonexistent/program"], "/nonexistent/program is missing or not executable"),
])
def test_initramfs_refuses_with_one_line(tmp_path, args, message):
    out = tmp_path / "i.cpio.gz"
    p = run(VMTEST / "initramfs", out, *args) if args else run(VMTEST / "initramfs", out)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and message in p.stderr
    assert not out.exists()


def test_kernels_rejects_a_bad_series_without_fetching(tmp_path):
    p = run(VMTEST / "kernels", "six", env={**os.environ, "IPCTRACE_VMTEST_CACHE": str(tmp_path)})
    assert p.returncode == 2
    assert p.stderr.strip() == "vmtest: bad kernel series 'six' (want e.g. 6.1)"


def test_kernels_uses_the_cache_and_checks_the_config(tmp_path):
    """A cached kernel is not fetched again; one without kprobes is refused by name."""
    k = tmp_path / "kernels" / "6.1"
    k.mkdir(parents=True)
    (k / "vmlinuz").write_bytes(b"x")
    (k / "release").write_text("6.1.0-test-cloud-amd64\n")
    opts = ["DEBUG_INFO_BTF", "BPF_SYSCALL", "BPF_EVENTS", "KPROBES", "KPROBE_EVENTS",
            "DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "FTRACE_SYSCALLS", "BLK_DEV_INITRD", "RD_GZIP",
            "DEVTMPFS", "SERIAL_8250_CONSOLE", "TMPFS", "UNIX"]
    env = {**os.environ, "IPCTRACE_VMTEST_CACHE": str(tmp_path)}
    (k / "config").write_text("".join(f"CONFIG_{o}=y\n" for o in opts))
    p = run(VMTEST / "kernels", "6.1", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"6.1 6.1.0-test-cloud-amd64 {k / 'vmlinuz'}\n"
    (k / "config").write_text("".join(f"CONFIG_{o}=y\n" for o in opts if o != "KPROBES"))
    p = run(VMTEST / "kernels", "6.1", env=env)
    assert p.returncode == 2
    assert "lacks built-in CONFIG_KPROBES" in p.stderr


@pytest.mark.parametrize("args, message", [
    (["--iterations", "0"], "--iterations needs a positive integer"),
    (["--bogus"], "unknown option --bogus"),
])
def test_run_rejects_bad_options(args, message):
    p = run(VMTEST / "run", *args)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and message in p.stderr


def test_run_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "precious").write_text("keep me")
    p = run(VMTEST / "run", "--out", tmp_path)
    assert p.returncode == 2
    assert "holds no earlier vmtest" in p.stderr
    assert (tmp_path / "precious").read_text() == "keep me"
