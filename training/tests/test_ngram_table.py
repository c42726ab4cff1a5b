"""The corpus n-gram table builder: which continuations it keeps, document boundaries, and
the file layout the C++ reader (engine/decoding/ngram_table.h) expects."""
import struct

import numpy as np

from training import ngram_table


def test_keeps_frequent_dominant_continuations_within_documents():
    bits = ngram_table.bits_for(16)
    assert bits == 4
    # "1 2 -> 3" nine times, "1 2 -> 4" once; "5 6 -> 7" twice only; 0 is a document boundary.
    ids = np.array([1, 2, 3, 0] * 9 + [1, 2, 4, 0] + [5, 6, 7, 0] * 2 + [1, 2, 0, 9], dtype=np.uint16)
    barrier = ids == 0
    keys, nxt = ngram_table.build_order(ids, 2, bits, min_count=3, min_share=0.6, barrier=barrier)
    assert keys.tolist() == [(1 << 4) | 2]
    assert nxt.tolist() == [3]
    # A looser count keeps "5 6 -> 7"; n-grams across the boundary 0 never appear.
    keys, nxt = ngram_table.build_order(ids, 2, bits, min_count=2, min_share=0.6, barrier=barrier)
    assert dict(zip(keys.tolist(), nxt.tolist())) == {(1 << 4) | 2: 3, (5 << 4) | 6: 7}
    # A share above 0.9 drops "1 2" (3 in 9 of its 10 continuations; "1 2 <boundary>" is not one).
    keys, _ = ngram_table.build_order(ids, 2, bits, min_count=2, min_share=0.95, barrier=barrier)
    assert (1 << 4) | 2 not in keys.tolist()


def test_ties_go_to_the_smallest_token_id():
    ids = np.array([1, 2, 8, 1, 2, 5, 1, 2, 8, 1, 2, 5], dtype=np.uint16)
    keys, nxt = ngram_table.build_order(ids, 2, 4, min_count=1, min_share=0.5, barrier=np.zeros(len(ids), bool))
    assert dict(zip(keys.tolist(), nxt.tolist()))[(1 << 4) | 2] == 5


def test_file_layout(tmp_path):
    orders = [(np.zeros(0, np.uint64), np.zeros(0, np.uint32)),
              (np.array([18, 40], np.uint64), np.array([3, 7], np.uint32))]
    path = str(tmp_path / "t.bin")
    size = ngram_table.write(path, 16, 4, orders)
    data = open(path, "rb").read()
    assert size == len(data) == 8 + 16 + 2 * 8 + 2 * 8 + 2 * 4
    assert data[:8] == b"CRNGRAM\0"
    assert struct.unpack_from("<4I", data, 8) == (1, 16, 2, 4)
    assert struct.unpack_from("<2Q", data, 24) == (0, 2)
    assert struct.unpack_from("<2Q", data, 40) == (18, 40)
    assert struct.unpack_from("<2I", data, 56) == (3, 7)
