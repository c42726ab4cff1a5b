"""Dispatch `python3 -m training <command> [args]`."""
import sys

COMMANDS = {
    "corpus": "training.corpus",
    "corpus-subset": "training.corpus_subset",
    "pretrain": "training.pretrain",
    "distill": "training.distill",
    "export-fixture": "training.export_fixture",
    "ngram-table": "training.ngram_table",
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or sys.argv[1] not in COMMANDS:
        print("usage: python3 -m training {%s} [--help]" % "|".join(COMMANDS))
        return 0 if len(sys.argv) >= 2 and sys.argv[1] in ("-h", "--help") else 2
    import importlib
    mod = importlib.import_module(COMMANDS[sys.argv[1]])
    return mod.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
