#!/usr/bin/env python3
"""Acceptance report for a base model + Cross-Regression adapter: tokens per forward (TPF)
and tokens/s of every decoding mode on held-out code prompts, written as Markdown.

    /usr/bin/python3 scripts/acceptance_report.py            # models/default -> docs/acceptance.md

Prompts come from the corpus files the trainer held out (same deterministic split as
`training`), so none of them was trained on. Each configuration runs
`crossreg-generate --format jsonl` on every prompt; TPF is committed tokens / decode forwards
summed over prompts, tokens/s is committed tokens / decode seconds. The untrained baseline is
the same LoRA shape with B = 0 (PEFT's initialisation), written next to the report's inputs.
The report (--out, overwritten) opens with a line naming the host, its ISA, the date and this
command (scripts/figures_file.py).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import figures_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def def_prompts(name, lines, limit, max_chars):
    """Prefixes of a file that end at its first `limit` `def ...:` lines past the imports
    (line 16 on): the model then writes a function body."""
    out = []
    for i, line in enumerate(lines):
        if i >= 15 and line.lstrip().startswith("def ") and line.rstrip().endswith(":"):
            out.append({"file": name, "line": i + 1, "text": "".join(lines[: i + 1])[-max_chars:]})
            if len(out) == limit:
                break
    return out


def heldout_prompts(corpus_root, holdout_pct, count, max_chars):
    """Prefixes of held-out files that end just after a `def` line: the model writes a body."""
    from training.corpus_split import is_heldout, list_corpus  # same split as the trainer
    prompts = []
    files = [f for f in list_corpus(corpus_root) if is_heldout(f, holdout_pct)]
    for rel in files:
        with open(os.path.join(corpus_root, rel), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines(keepends=True)
        # Up to two prompts per file, at the first `def` lines past the imports.
        prompts += def_prompts(rel, lines, 2, max_chars)
        if len(prompts) >= count:
            break
    return prompts[:count]


def packed_heldout_prompts(corpus_dir, count, max_chars):
    """The same prompts, cut from the held-out stream of a packed corpus (scripts/build_corpus.sh):
    its documents are `<|bos|> file <|eos|>` in manifest order, so each decoded document is
    matched to its manifest row by sha256 (a document that does not match is skipped)."""
    import hashlib
    from training import packed_corpus
    from training.tokenizer import ByteBPETokenizer
    meta, tok_path, streams = packed_corpus.load(corpus_dir, ("heldout",))
    tok = ByteBPETokenizer.load(tok_path)
    bos, eos = meta["tokenizer"]["specials"]["<|bos|>"], meta["tokenizer"]["specials"]["<|eos|>"]
    with open(os.path.join(corpus_dir, "manifest.tsv")) as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh][1:]
    names = {r[0]: f"{r[3]}:{r[4]}" for r in rows if r[2] == "heldout"}
    ids = streams["heldout"].tolist()
    docs, start = [], None
    for i, t in enumerate(ids):
        if t == bos:
            start = i + 1
        elif t == eos and start is not None:
            docs.append(ids[start:i])
            start = None
    named = []
    for doc in docs:
        text = tok.decode(doc)
        name = names.get(hashlib.sha256(text.encode()).hexdigest())
        if name is not None:
            named.append((hashlib.sha256(name.encode()).hexdigest(), name, text))
    # One prompt per file, files in the order of their name's hash: spread over the packages
    # rather than the alphabet's first few.
    prompts = []
    for _, name, text in sorted(named):
        prompts += def_prompts(name, text.splitlines(keepends=True), 1, max_chars)
        if len(prompts) >= count:
            break
    return prompts


def write_untrained_adapter(model_dir, trained_adapter, out_dir):
    """The trained adapter's shape with PEFT's initial state (B = 0): Q = base on the rows."""
    import torch
    from training import hf_io
    cfg = json.load(open(os.path.join(trained_adapter, "adapter_config.json")))
    xr = json.load(open(os.path.join(trained_adapter, "crossreg_adapter.json")))
    model = hf_io.load_model_dir(model_dir)
    model.add_lora(cfg["r"], cfg["lora_alpha"], seed=0)
    with torch.no_grad():
        for _, _, _, m in model.lora_modules():
            m.lora_B.zero_()
    hf_io.save_adapter(model, out_dir, cfg["r"], cfg["lora_alpha"], model_dir, xr["placeholder_token_id"],
                       xr.get("window", 16))


def run_prompt(binary, model, adapter, prompt, seed, cfg, max_new, threads, backend="cpu"):
    """One crossreg-generate run of `cfg` on one prompt: its counts and decode seconds."""
    cmd = [binary, "--model", model, "--prompt", prompt["text"], "--max-new-tokens", str(max_new),
           "--format", "jsonl", "--ignore-eos", "--add-bos=false", "--threads", str(threads),
           "--mode", cfg["mode"], "--temperature", str(cfg["temperature"]), "--seed", str(seed),
           "--backend", backend]
    if cfg["mode"] != "ar":
        cmd += ["--gamma", str(cfg["gamma"])]
    if cfg["mode"] == "lossy":
        cmd += ["--beta", str(cfg["beta"]), "--tau", str(cfg["tau"])]
    if "fork_outcomes" in cfg:
        cmd += ["--fork-outcomes", str(cfg["fork_outcomes"]), "--fork-depth", str(cfg.get("fork_depth", 0))]
    if cfg.get("draft_layout"):
        cmd += ["--draft-layout", cfg["draft_layout"]]
    if cfg.get("ngram_assist"):
        cmd += ["--ngram-assist"]
    if cfg.get("adaptive"):
        cmd += ["--adaptive-gamma"]
    if cfg.get("no_table"):
        cmd += ["--ngram-table", "none"]
    if cfg.get("adapter", True) and adapter:
        cmd += ["--adapter", cfg.get("adapter_dir", adapter)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    return {"committed": len(r["ids"]), "forwards": r["forwards"], "drafted": r["drafted"],
            "accepted": r["accepted"], "ar_forwards": r.get("ar_forwards", 0), "seconds": r["timing"]["decode_s"]}


def run_configs(binary, model, adapter, prompts, configs, max_new, threads, backend="cpu"):
    """Every configuration on every prompt. The configurations take turns prompt by prompt (in
    an order rotated per prompt), so a change in the shared machine's speed during the run
    reaches every row alike instead of the rows that happened to run then."""
    totals = [{"committed": 0, "forwards": 0, "drafted": 0, "accepted": 0, "ar_forwards": 0, "seconds": 0.0}
              for _ in configs]
    for i, p in enumerate(prompts):
        for k in range(len(configs)):
            j = (k + i) % len(configs)
            r = run_prompt(binary, model, adapter, p, i + 1, configs[j], max_new, threads, backend)
            for key, value in r.items():
                totals[j][key] += value
        print(f"[acceptance] prompt {i + 1}/{len(prompts)} done ({p['file']})", flush=True)
    return [{"tpf": t["committed"] / t["forwards"], "tokens_per_s": t["committed"] / t["seconds"],
             "accept_rate": t["accepted"] / t["drafted"] if t["drafted"] else 0.0, "tokens": t["committed"],
             "ar_share": t["ar_forwards"] / t["forwards"]} for t in totals]


def ngram_baselines():
    """n-gram drafting at γ 4 and 8, with the model's corpus table (ngram_table.bin) and
    without it (the context alone): the training-free rows every report carries."""
    rows = []
    for no_table in (False, True):
        for g in (4, 8):
            name = "n-gram, context only (no corpus table)" if no_table else "n-gram"
            rows.append({"name": f"{name} T=0 γ={g}", "mode": "ngram", "temperature": 0, "gamma": g,
                         "adapter": False, **({"no_table": True} if no_table else {})})
    return rows


def self_drafting_configs():
    """The rows of a model that drafts for itself in outcome blocks (pretrain --hybrid): every
    outcome a block ("every outcome") or only outcomes n < 2 and n = γ ("R=2"), block depth at
    most the 6 rows such a model is trained with, beside the same n-gram baselines."""
    blocks = {"draft_layout": "blocks"}
    every = lambda g: {**blocks, "fork_outcomes": 0, "fork_depth": min(g, 6)}  # noqa: E731
    two = lambda g: {**blocks, "fork_outcomes": 2, "fork_depth": min(g, 6)}  # noqa: E731
    configs = [{"name": "AR", "mode": "ar", "temperature": 0}]
    for g in (1, 2, 4):
        configs.append({"name": f"lossless blocks, every outcome T=0 γ={g}", "mode": "lossless", "temperature": 0,
                        "gamma": g, **every(g)})
    configs.append({"name": "lossless blocks, every outcome T=0.6 γ=1", "mode": "lossless", "temperature": 0.6,
                    "gamma": 1, **every(1)})
    configs.append({"name": "lossless blocks, every outcome T=0.6 γ=4", "mode": "lossless", "temperature": 0.6,
                    "gamma": 4, **every(4)})
    for g in (4, 8):
        configs.append({"name": f"lossless blocks R=2 T=0 γ={g}", "mode": "lossless", "temperature": 0, "gamma": g,
                        **two(g)})
    configs.append({"name": "lossless blocks R=2 T=0.6 γ=4", "mode": "lossless", "temperature": 0.6, "gamma": 4,
                    **two(4)})
    for t, (beta, tau) in ((0, (0.5, -1.0)), (0, (0.7, -3.0)), (0.6, (0.5, -1.0))):
        configs.append({"name": f"lossy blocks, every outcome T={t} γ=4 β={beta} τ={tau}", "mode": "lossy",
                        "temperature": t, "gamma": 4, "beta": beta, "tau": tau, **every(4)})
    configs.append({"name": "lossless blocks + n-gram assist, every outcome T=0 γ=4", "mode": "lossless",
                    "temperature": 0, "gamma": 4, "ngram_assist": True, **every(4)})
    configs += ngram_baselines()
    configs.append({"name": "adaptive γ≤8: blocks + n-gram assist T=0", "mode": "lossless", "temperature": 0,
                    "gamma": 8, "ngram_assist": True, "adaptive": True, **every(8)})
    configs.append({"name": "adaptive γ≤8: blocks T=0", "mode": "lossless", "temperature": 0, "gamma": 8,
                    "adaptive": True, **every(8)})
    # One draft per forward: the cheapest forward with the model's own draft (1 control
    # row, 2 one-row blocks), where the CPU's extra rows cost least per accepted token.
    configs.append({"name": "adaptive γ≤2: blocks + n-gram assist T=0", "mode": "lossless", "temperature": 0,
                    "gamma": 2, "ngram_assist": True, "adaptive": True, **every(2)})
    configs.append({"name": "adaptive γ≤2: blocks T=0", "mode": "lossless", "temperature": 0, "gamma": 2,
                    "adaptive": True, **every(2)})
    configs.append({"name": "adaptive γ≤8: n-gram T=0", "mode": "ngram", "temperature": 0, "gamma": 8,
                    "adapter": False, "adaptive": True})
    return configs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models/default"))
    ap.add_argument("--adapter", default=None,
                    help="default: MODEL/adapter if it exists, else none; 'none': a model that drafts "
                         "for itself (config.json crossreg_draft, from pretrain --hybrid)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/bin/crossreg-generate"))
    ap.add_argument("--corpus-root", default="/usr/lib/python3.11")
    ap.add_argument("--holdout-pct", type=float, default=5.0)
    ap.add_argument("--packed-corpus", default=None,
                    help="take the prompts from this packed corpus's held-out stream "
                         "(training/data/corpus) instead of --corpus-root's files")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-chars", type=int, default=1200, help="prompt length cap (characters)")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"],
                    help="crossreg-generate's backend (cuda: a CUDA-built binary on a GPU machine)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/acceptance.md"))
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="run AR and the configurations whose name starts with TEXT (repeatable); "
                         "default: every configuration")
    args = ap.parse_args()
    adapter = args.adapter or os.path.join(args.model, "adapter")
    if args.adapter is None and not os.path.isdir(adapter):
        adapter = "none"  # no bundled adapter: the model must draft for itself (checked below)
    if adapter == "none":
        adapter = None
        with open(os.path.join(args.model, "config.json")) as fh:
            if "crossreg_draft" not in json.load(fh):
                raise SystemExit(f"--adapter none: {args.model}/config.json has no crossreg_draft: the "
                                 f"model does not draft for itself (pass its adapter)")

    if args.packed_corpus:
        prompts = packed_heldout_prompts(args.packed_corpus, args.prompts, args.max_chars)
    else:
        prompts = heldout_prompts(args.corpus_root, args.holdout_pct, args.prompts, args.max_chars)
    print(f"[acceptance] {len(prompts)} held-out prompts from {len({p['file'] for p in prompts})} files", flush=True)
    untrained = None
    if adapter is not None:
        untrained = tempfile.mkdtemp(prefix="crossreg-untrained-adapter-")
        write_untrained_adapter(args.model, adapter, untrained)

    configs = [{"name": "AR", "mode": "ar", "temperature": 0}]
    for t in (0, 0.6):
        for g in (4, 8, 16):
            configs.append({"name": f"lossless T={t} γ={g}", "mode": "lossless", "temperature": t, "gamma": g})
    for t in (0, 0.6):
        for beta, tau in ((0.5, -1.0), (0.7, -3.0)):
            configs.append({"name": f"lossy T={t} γ=8 β={beta} τ={tau}", "mode": "lossy", "temperature": t,
                            "gamma": 8, "beta": beta, "tau": tau})
    # Forked refill (docs/algorithm.md): outcomes n < 2 get their own placeholder chain, 3 drafts deep.
    fork = {"fork_outcomes": 2, "fork_depth": 3}
    for t in (0, 0.6):
        for g in (4, 8):
            configs.append({"name": f"lossless forked T={t} γ={g}", "mode": "lossless", "temperature": t, "gamma": g,
                            **fork})
    for g in (4, 8):
        configs.append({"name": f"lossless forked + n-gram assist T=0 γ={g}", "mode": "lossless", "temperature": 0,
                        "gamma": g, "ngram_assist": True, **fork})
    configs += ngram_baselines()
    configs.append({"name": "untrained adapter (B=0), lossless T=0 γ=8", "mode": "lossless", "temperature": 0,
                    "gamma": 8, "adapter_dir": untrained})
    configs.append({"name": "untrained adapter (B=0), lossless forked T=0 γ=8", "mode": "lossless",
                    "temperature": 0, "gamma": 8, "adapter_dir": untrained, **fork})
    configs.append({"name": "untrained adapter (B=0), forked + n-gram assist T=0 γ=8", "mode": "lossless",
                    "temperature": 0, "gamma": 8, "adapter_dir": untrained, "ngram_assist": True, **fork})
    # Outcome blocks (docs/algorithm.md): a block of placeholder rows per acceptance outcome
    # (outcomes n < 2 and n = γ; "every outcome": all γ + 1), bidirectional inside.
    for t in (0, 0.6):
        configs.append({"name": f"lossless blocks T={t} γ=4", "mode": "lossless", "temperature": t, "gamma": 4,
                        "draft_layout": "blocks", "fork_outcomes": 2, "fork_depth": 4})
    configs.append({"name": "lossless blocks T=0 γ=8", "mode": "lossless", "temperature": 0, "gamma": 8,
                    "draft_layout": "blocks", "fork_outcomes": 2, "fork_depth": 6})
    configs.append({"name": "lossless blocks, every outcome T=0 γ=4", "mode": "lossless", "temperature": 0,
                    "gamma": 4, "draft_layout": "blocks", "fork_outcomes": 0, "fork_depth": 4})
    configs.append({"name": "adaptive γ≤8: blocks + n-gram assist T=0", "mode": "lossless", "temperature": 0,
                    "gamma": 8, "ngram_assist": True, "adaptive": True, "draft_layout": "blocks",
                    "fork_outcomes": 2, "fork_depth": 6})
    # Adaptive draft length: γ' per forward from acceptance and this machine's cost curve.
    configs.append({"name": "adaptive γ≤8: forked + n-gram assist T=0", "mode": "lossless", "temperature": 0,
                    "gamma": 8, "ngram_assist": True, "adaptive": True, **fork})
    configs.append({"name": "adaptive γ≤8: n-gram T=0", "mode": "ngram", "temperature": 0, "gamma": 8,
                    "adapter": False, "adaptive": True})

    if untrained is None:  # a self-drafting model: its own layout (outcome blocks), no adapter to zero
        configs = self_drafting_configs()
    if args.only:
        configs = [c for c in configs if c["mode"] == "ar" or any(c["name"].startswith(t) for t in args.only)]
        if len(configs) == 1:
            raise SystemExit(f"--only {args.only}: no configuration's name starts with that")
        print(f"[acceptance] {len(configs)} configurations: " + ", ".join(c["name"] for c in configs), flush=True)

    rows = []
    t0 = time.time()
    try:
        results = run_configs(args.binary, args.model, adapter, prompts, configs, args.max_new_tokens,
                              args.threads, args.backend)
    finally:
        if untrained is not None:
            shutil.rmtree(untrained, ignore_errors=True)
    for cfg, r in zip(configs, results):
        rows.append((cfg, r))
        print(f"[acceptance] {cfg['name']}: TPF {r['tpf']:.2f}, {r['tokens_per_s']:.1f} tokens/s, "
              f"accepted {100 * r['accept_rate']:.0f}% of drafts", flush=True)
    ar_tps = rows[0][1]["tokens_per_s"]

    lines = [
        "# Acceptance report",
        "",
        figures_file.header(),
        "",
        f"Produced by `scripts/acceptance_report.py` on {time.strftime('%Y-%m-%d')} "
        f"({time.time() - t0:.0f} s): model `{os.path.relpath(args.model, ROOT)}`, "
        + (f"adapter `{os.path.relpath(adapter, ROOT)}`" if adapter else "no adapter (the model drafts for itself)")
        + f", {len(prompts)} held-out prompts (prefixes of "
        f"{len({p['file'] for p in prompts})} Python files the trainer never saw, each ending at a `def` line, "
        f"at most {args.max_chars} characters), {args.max_new_tokens} new tokens each, "
        f"{'CUDA' if args.backend == 'cuda' else 'CPU'} backend (`crossreg-generate`, {os.cpu_count()} cores).",
        "",
        "TPF = committed tokens / decode forwards (the paper's acceptance length); speedup = tokens/s "
        "÷ AR tokens/s on the same machine and prompts. Sampled rows (T=0.6) use seeds 1..N. The "
        "configurations take turns prompt by prompt, so the shared machine's changes of speed reach "
        "every row alike.",
        "",
        "| configuration | TPF | draft acceptance | tokens/s | speedup vs AR | AR forwards |",
        "|---|---|---|---|---|---|",
    ]
    for cfg, r in rows:
        ar_share = f"{100 * r['ar_share']:.0f}%" if cfg.get("adaptive") else ""
        lines.append(f"| {cfg['name']} | {r['tpf']:.2f} | {100 * r['accept_rate']:.0f}% | "
                     f"{r['tokens_per_s']:.1f} | {r['tokens_per_s'] / ar_tps:.2f} | {ar_share} |")
    ngram_note = ("n-gram needs no drafter and is the training-free baseline: it drafts from the request's own "
                  "context, then from the model's corpus n-gram table (`ngram_table.bin`, built by `python3 -m "
                  "training ngram-table`) where the context has no match of 2+ tokens; the \"context only\" rows "
                  "leave the table out.")
    if adapter is None:
        lines += ["", "Prompts: " + ", ".join(sorted({f"`{p['file']}`" for p in prompts})), "",
                  "How to read it: lossless rows must stay exact (the test suite proves that); their TPF measures "
                  "the model's own drafts. \"blocks\" is the outcome-block layout (docs/algorithm.md): "
                  "\"every outcome\" gives each of the γ + 1 acceptance outcomes a block of min(γ, 6) placeholder "
                  "rows, \"R=2\" only outcomes 0, 1 and γ; \"n-gram assist\" lets prompt-lookup drafts take the "
                  "first slots where the text repeats or the corpus table knows the context. " + ngram_note +
                  " Adaptive rows pick each forward's draft length from acceptance and this machine's measured "
                  "forward cost (AR forwards = the share it ran as plain AR). The model card discusses the figures.",
                  ""]
    else:
        lines += ["", "Prompts: " + ", ".join(sorted({f"`{p['file']}`" for p in prompts})), "",
              "How to read it: lossless rows must stay exact (the test suite proves that); their TPF "
              "measures the adapter. \"forked\" is the forked refill (fork_outcomes 2, fork_depth 3), "
              "\"n-gram assist\" lets prompt-lookup drafts take the first slots where the text repeats or the corpus table knows the context "
              "(docs/algorithm.md). n-gram needs no adapter and is the training-free baseline: it drafts from "
              "the request's own context, then from the model's corpus n-gram table (`ngram_table.bin`, built "
              "by `python3 -m training ngram-table`) where the context has no match of 2+ tokens; the "
              "\"context only\" rows leave the table out. The "
              "untrained rows are the same LoRA shape with B = 0. Adaptive rows pick each forward's draft "
              "length from acceptance and this machine's measured forward cost (AR forwards = the share it "
              "ran as plain AR). The model card discusses the figures.", ""]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines))
    print(f"[acceptance] wrote {args.out}")


if __name__ == "__main__":
    main()
