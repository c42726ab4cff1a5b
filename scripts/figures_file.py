"""A benchmark script's table as a figures file (docs/figures/, docs/benchmarks.md).

`write(path, lines)` overwrites `path` with one header line, a blank line and `lines`. The
header names what the figures depend on: the CPU model (/proc/cpuinfo "model name"), the
ISA flags the kernels choose by, the core count, the date and the exact command, with any
CROSSREG_* environment variables in front of it (CROSSREG_SIMD=avx2 changes every figure).
A file therefore always holds one run, and git keeps the earlier ones.
"""
import os
import shlex
import sys
import time

ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")


def host():
    """'AMD EPYC (family 25, model 1), 2 cores, avx2 (no avx512f avx512_bf16 amx_tile)'. A cloud
    VM's model name is often just "AMD EPYC"; the family and model numbers tell Zen 3 from Zen 4
    from Zen 5."""
    model, flags, numbers = "unknown CPU", set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key in ("cpu family", "model") and key not in numbers:
                    numbers[key] = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    if len(numbers) == 2:
        model += f" (family {numbers['cpu family']}, model {numbers['model']})"
    have = [f for f in ISA_FLAGS if f in flags]
    missing = [f for f in ISA_FLAGS if f not in flags]
    isa = " ".join(have) or "none of " + " ".join(ISA_FLAGS)
    if have and missing:
        isa += f" (no {' '.join(missing)})"
    return f"{model}, {os.cpu_count()} cores, {isa}"


def command():
    """The command line as run, CROSSREG_* environment variables first."""
    env = [f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("CROSSREG_")]
    return " ".join(env + [shlex.quote(a) for a in sys.argv])


def header():
    return f"Host: {host()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; command: `{command()}`"


def report(lines, path=None):
    """Prints `lines` and, with a `path`, writes them there too (`write`)."""
    print("\n".join(lines))
    if path:
        write(path, lines)
        print(f"wrote {path}")


def write(path, lines):
    """Overwrites `path` with the header line and `lines` (a table and its notes)."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        f.write(header() + "\n\n" + "\n".join(lines).rstrip("\n") + "\n")
