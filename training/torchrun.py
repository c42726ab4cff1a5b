"""`torchrun` as installed, made to start on Debian 12 (PyTorch 1.13 on Python 3.11) and to let
several single-machine launches run side by side.

python3 -m training.torchrun --standalone --nproc_per_node 2 -m training distill ...

Two changes to the launcher, both made before torchrun's own run():
- PyTorch 1.13 parses its --redirects/--tee values ("0" by default) by iterating the `Std`
  flag enum, and from Python 3.11 iterating a flag enum skips its zero and multi-bit members,
  so every launch fails with "'NoneType' object has no attribute 'get'". A parser that builds
  the members by value replaces it; with a launcher that parses correctly it changes nothing.
- `--standalone` in PyTorch 1.13 puts every launch's rendezvous store on localhost:29400. A
  second launch on the machine then finds the first one's store and uses it as a client, and
  when the first launch ends its store goes with it: the second fails with
  RendezvousConnectionError, however far its training got. A standalone launch needs nobody
  else to find its store, so here it binds a free port (localhost:0); the workers are told
  their own MASTER_PORT by the launcher either way.
Everything else is torchrun's; plain `torchrun` works as well when only one launch runs at a
time.
"""
import re
import sys
import uuid


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


def standalone_on_a_free_port(args) -> None:
    """--standalone as a private c10d rendezvous: a store on a port the kernel picks, and an id
    of its own (torchrun's parsed arguments, changed in place)."""
    if not args.standalone:
        return
    args.standalone = False
    args.rdzv_backend = "c10d"
    args.rdzv_endpoint = "localhost:0"
    args.rdzv_id = str(uuid.uuid4())


def main(argv=None) -> int:
    _patch_std_parsing()
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import record

    args = run.parse_args(sys.argv[1:] if argv is None else argv)
    standalone_on_a_free_port(args)
    record(run.run)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
