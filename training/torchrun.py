"""`torchrun` as installed, made to start on Debian 12 (PyTorch 1.13 on Python 3.11).

python3 -m training.torchrun --standalone --nproc_per_node 2 -m training distill ...

PyTorch 1.13's launcher parses its --redirects/--tee values ("0" by default) by iterating
the `Std` flag enum, and from Python 3.11 iterating a flag enum skips its zero and
multi-bit members, so every launch fails with "'NoneType' object has no attribute 'get'".
This module swaps in a parser that builds the members by value, then runs torchrun's own
main(); with a PyTorch whose launcher parses correctly (2.x) it changes nothing, and plain
`torchrun` works as well.
"""
import re
import sys


def _patch_std_parsing() -> None:
    from torch.distributed.elastic.multiprocessing import api

    try:
        if api.Std.from_str("0") == api.Std.NONE:
            return
    except Exception:  # noqa: BLE001 - the broken parser raises on some inputs
        pass

    def from_str(vm: str):
        if re.fullmatch(r"[0-7]", vm):
            return api.Std(int(vm))
        if re.fullmatch(r"(\d:[0-7],)*\d:[0-7]", vm):
            return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
        raise ValueError(f"{vm} does not match a number (e.g. 0) or a mapping (e.g. 0:1,1:2)")

    api.Std.from_str = staticmethod(from_str)


def main(argv=None) -> int:
    _patch_std_parsing()
    from torch.distributed import run
    run.main(sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
