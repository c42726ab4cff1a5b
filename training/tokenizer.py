"""Byte-level BPE tokenizer: training, encode/decode, Hugging Face tokenizer.json export/import.

Pre-tokenizer: the GPT-2 regex
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
approximated with Python's `re` (which has no \\p{..} classes):
    \\p{L}  -> [^\\W\\d_]      (str.isalnum() minus decimal digits and '_')
    \\p{N}  -> \\d             (Unicode decimal digits, category Nd)
    \\s     -> [^\\S\\x1c-\\x1f] (Python also counts U+001C..U+001F as space; Unicode does not)
Exact for ASCII text. Outside ASCII it differs for numerals that are not Nd (e.g. '²', 'Ⅻ':
\\p{N} in GPT-2, a letter here) and for letters/marks where str.isalnum() disagrees with the
Unicode L category; such text still round-trips losslessly, it is only split differently.
Token ids: 0..255 are the single bytes (in byte order), then merges in rank order, then the
special tokens.
"""
import collections
import json
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

_WS = r"[^\S\x1c-\x1f]"
_PUNCT = r"(?:[^\s\w]|[_\x1c-\x1f])"
PRETOKENIZE_RE = re.compile(
    r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?" + _PUNCT + r"+|" + _WS + r"+(?!\S)|"
    + _WS + r"+")
# The original regex, as HF `tokenizers` runs it (Oniguruma), for the export.
GPT2_REGEX = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")

DEFAULT_SPECIALS = ("<|bos|>", "<|eos|>", "<|draft|>")


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


BYTE_ENC = bytes_to_unicode()
BYTE_DEC = {v: k for k, v in BYTE_ENC.items()}


def pretokenize(text: str) -> List[str]:
    return PRETOKENIZE_RE.findall(text)


def _word_symbols(word: str) -> Tuple[str, ...]:
    return tuple(BYTE_ENC[b] for b in word.encode("utf-8"))


def count_words(texts: Iterable[str]) -> "collections.Counter[str]":
    """Pre-tokenized word frequencies (the only statistic BPE training needs; counters of
    separate text shards can be summed, which is how the corpus builder parallelises it)."""
    counts: "collections.Counter[str]" = collections.Counter()
    for t in texts:
        counts.update(pretokenize(t))
    return counts


def train_bpe(texts: Iterable[str], vocab_size: int,
              specials: Sequence[str] = DEFAULT_SPECIALS, log=None) -> "ByteBPETokenizer":
    """Classic BPE on pre-tokenized word counts, with incremental pair-count updates.
    Ties between equally frequent pairs break on the lexicographically smallest pair, so the
    result is deterministic."""
    return train_bpe_from_counts(count_words(texts), vocab_size, specials, log)


def train_bpe_from_counts(counts: Dict[str, int], vocab_size: int,
                          specials: Sequence[str] = DEFAULT_SPECIALS,
                          log=None) -> "ByteBPETokenizer":
    """train_bpe on precomputed word counts. The result does not depend on the counter's
    iteration order (ties break on the pair itself)."""
    n_merges = vocab_size - 256 - len(specials)
    if n_merges < 0:
        raise ValueError("vocab_size too small for 256 bytes + special tokens")
    words = [list(_word_symbols(w)) for w in counts]
    freqs = list(counts.values())
    pair_count = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words containing it
    for i, (w, f) in enumerate(zip(words, freqs)):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += f
            where[(a, b)].add(i)
    merges: List[Tuple[str, str]] = []
    import heapq
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        c = pair_count.get(pair, 0)
        if c <= 0:
            continue
        if -negc != c:  # stale entry
            heapq.heappush(heap, (-c, pair))
            continue
        merges.append(pair)
        a, b = pair
        new = a + b
        changed = collections.Counter()
        for i in list(where.pop(pair, ())):
            w, f = words[i], freqs[i]
            for x, y in zip(w, w[1:]):
                changed[(x, y)] -= f
            j, out = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(new)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for x, y in zip(out, out[1:]):
                changed[(x, y)] += f
                where[(x, y)].add(i)
        pair_count.pop(pair, None)
        for p, d in changed.items():
            if p == pair or d == 0:
                continue
            pair_count[p] += d
            if d > 0:
                heapq.heappush(heap, (-pair_count[p], p))
        if log and len(merges) % 500 == 0:
            log(f"bpe: {len(merges)}/{n_merges} merges")
    vocab = {BYTE_ENC[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = ByteBPETokenizer(vocab, merges, {})
    for s in specials:
        tok.add_special(s)
    return tok


class ByteBPETokenizer:
    # Words whose merges are memoised. Code has a long tail of identifiers: ~1M entries cover
    # the corpus's frequent words at a few hundred MB per encoding process.
    CACHE_MAX = 1_000_000

    def __init__(self, vocab: Dict[str, int], merges: List[Tuple[str, str]],
                 specials: Dict[str, int]):
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self.ranks = {m: i for i, m in enumerate(self.merges)}
        self.specials = dict(specials)
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.specials.items()})
        self._cache: Dict[str, List[int]] = {}
        self._special_re = None

    def add_special(self, s: str) -> int:
        if s not in self.specials:
            i = max(list(self.vocab.values()) + list(self.specials.values())) + 1
            self.specials[s] = i
            self.id_to_token[i] = s
            self._special_re = None
        return self.specials[s]

    @property
    def vocab_size(self) -> int:
        return max(self.id_to_token) + 1

    def token_id(self, s: str) -> Optional[int]:
        return self.specials.get(s, self.vocab.get(s))

    def _bpe(self, word: str) -> List[int]:
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        syms = list(_word_symbols(word))
        while len(syms) > 1:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            a, b = self.merges[best]
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        ids = [self.vocab[s] for s in syms]
        if len(self._cache) < self.CACHE_MAX:
            self._cache[word] = ids
        return ids

    def encode_ordinary(self, text: str) -> List[int]:
        """encode(text, allow_special=False) without the special-token split: the corpus hot
        loop (one dict lookup per pre-tokenized word once the cache is warm)."""
        out: List[int] = []
        extend, cache, bpe = out.extend, self._cache, self._bpe
        for w in PRETOKENIZE_RE.findall(text):
            ids = cache.get(w)
            extend(ids if ids is not None else bpe(w))
        return out

    def encode(self, text: str, allow_special: bool = True) -> List[int]:
        ids: List[int] = []
        if allow_special and self.specials:
            if self._special_re is None:
                alts = sorted(self.specials, key=len, reverse=True)
                self._special_re = re.compile("(" + "|".join(map(re.escape, alts)) + ")")
            parts = self._special_re.split(text)
        else:
            parts = [text]
        for k, part in enumerate(parts):
            if k % 2 == 1 and allow_special and self.specials:
                ids.append(self.specials[part])
                continue
            for w in pretokenize(part):
                ids.extend(self._bpe(w))
        return ids

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        out, buf = [], bytearray()
        for i in ids:
            t = self.id_to_token[int(i)]
            if t in self.specials:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                if not skip_special:
                    out.append(t)
            else:
                buf.extend(BYTE_DEC[c] for c in t)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    # ---- Hugging Face tokenizer.json -------------------------------------------------------
    def to_hf_json(self) -> dict:
        vocab = dict(self.vocab)
        vocab.update(self.specials)
        return {
            "version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [
                {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
                for s, i in sorted(self.specials.items(), key=lambda kv: kv[1])],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "post_processor": self._post_processor(),
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
                      "merges": [f"{a} {b}" for a, b in self.merges]},
        }

    def _post_processor(self) -> dict:
        """Every corpus file starts with <|bos|>, so encoding with special tokens must add it:
        a TemplateProcessing post-processor declares that (HF tokenizers and the engine both
        read it). Without a <|bos|> special token, only the byte-level offsets processor."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
        bos = "<|bos|>"
        if bos not in self.specials:
            return byte_level
        bid = self.specials[bos]
        template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {bos: {"id": bos, "ids": [bid], "tokens": [bos]}}}
        return {"type": "Sequence", "processors": [byte_level, template]}

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_hf_json(), f, ensure_ascii=False, indent=1)

    @classmethod
    def from_hf_json(cls, d: dict, where: str = "tokenizer.json") -> "ByteBPETokenizer":
        model = d.get("model", {})
        if model.get("type") != "BPE":
            raise ValueError(f"{where}: model.type {model.get('type')!r} is not BPE")
        pre = d.get("pre_tokenizer") or {}
        kinds = [pre.get("type")] + [p.get("type") for p in pre.get("pretokenizers", [])]
        if "ByteLevel" not in kinds:
            raise ValueError(f"{where}: only byte-level BPE tokenizers are supported")
        merges = []
        for m in model["merges"]:
            a, b = (m.split(" ", 1) if isinstance(m, str) else m)
            merges.append((a, b))
        specials = {t["content"]: t["id"] for t in d.get("added_tokens", [])}
        vocab = {t: i for t, i in model["vocab"].items() if t not in specials}
        return cls(vocab, merges, specials)

    @classmethod
    def load(cls, path: str) -> "ByteBPETokenizer":
        with open(path, encoding="utf-8") as f:
            return cls.from_hf_json(json.load(f), path)
