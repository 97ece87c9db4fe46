"""tessera.distributed on the CPU path: head assignment, mask slicing, and ulysses_attention in gloo groups of 2 and
4 processes (python/tests/dist_cases.py), bit for bit equal to the single-process call (float64 CPU executor).

The multi-process tests are marked `multiprocess`: one spawn per world size runs every case (about 10 s for 2
processes and 15 s for 4 on a 2-core machine); `-m "not multiprocess"` leaves them out.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (scripts/setup.sh installs it)")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

import tessera  # noqa: E402
import tessera.distributed as td  # noqa: E402
from conftest import dense_to_csr, dense_to_index_lists  # noqa: E402
from dist_cases import CASES, run_world  # noqa: E402

EQUALITY_CASES = [name for name in CASES if not name.startswith("error_")]
BALANCES = ("tiles", "even")
WORLDS = (2, 4)


# ------------------------------------------------------------------------------------------- assign_heads

def test_even_split_is_contiguous_with_the_remainder_first():
    a = td.assign_heads([1] * 5, 5, 2, "even")
    assert a.q_heads == ((0, 1, 2), (3, 4))
    assert a.kv_heads == ((0, 1, 2), (3, 4))
    a = td.assign_heads([1] * 40, 40, 4, "even")
    assert [len(h) for h in a.q_heads] == [10] * 4 and a.q_heads[1] == tuple(range(10, 20))


def test_balanced_is_longest_first_greedy():
    costs = [10, 9, 8, 7, 1, 2, 3, 4]
    a = td.assign_heads(costs, 8, 2, "tiles")
    # LPT: 10 -> r0, 9 -> r1, 8 -> r1, 7 -> r0, 4 -> r0 (17 = 17, 2 = 2 units: lower rank), 3 -> r1, 2 -> r1, 1 -> r0
    assert a.q_heads == ((0, 3, 4, 7), (1, 2, 5, 6)) and a.loads == (22, 22)
    assert sorted(h for hs in a.q_heads for h in hs) == list(range(8))
    assert all(list(hs) == sorted(hs) for hs in a.q_heads)  # local order ascending
    even = td.assign_heads(costs, 8, 2, "even")
    assert even.loads == (34, 10)


def test_balanced_spreads_equal_and_empty_heads():
    a = td.assign_heads([5] * 6, 6, 4, "tiles")
    assert sorted(len(h) for h in a.q_heads) == [1, 1, 2, 2]
    a = td.assign_heads([0, 0, 0, 0, 0], 5, 2, "tiles")
    assert a.q_heads == ((0, 2, 4), (1, 3))  # equal loads: the rank with fewer units, then the lower rank
    a = td.assign_heads([0, 0, 0, 0, 9], 5, 2, "tiles")
    assert a.q_heads == ((4,), (0, 1, 2, 3))  # the cost is active blocks alone: empty heads cost nothing


def test_gqa_units_keep_groups_together_or_split_into_replicas():
    # 8 query heads on 4 kv heads (G = 2), 2 ranks: groups stay whole
    a = td.assign_heads([1] * 8, 4, 2, "even")
    assert a.q_heads == ((0, 1, 2, 3), (4, 5, 6, 7)) and a.kv_heads == ((0, 1), (2, 3))
    # 6 query heads on 2 kv heads (G = 3), 4 ranks: each kv head split into 3 replicas of 1 query head
    a = td.assign_heads([1] * 6, 2, 4, "even")
    assert a.q_heads == ((0, 1), (2, 3), (4,), (5,)) and a.kv_heads == ((0, 0), (0, 1), (1,), (1,))
    # MQA, 8 heads on 1 kv head, 4 ranks: 4 replicas of 2 query heads
    a = td.assign_heads([1] * 8, 1, 4, "tiles")
    assert all(len(q) == 2 * len(kv) for q, kv in zip(a.q_heads, a.kv_heads))
    assert sorted(h for hs in a.q_heads for h in hs) == list(range(8))


def test_head_groups_split_each_ranks_units_contiguously():
    a = td.assign_heads([1] * 12, 4, 2, "even")  # units of 3 query heads: rank 0 kv 0, 1; rank 1 kv 2, 3
    groups = td._head_groups(a, 12, 2, 2)
    assert groups == [(((0, 1, 2), (6, 7, 8)), ((0,), (2,))), (((3, 4, 5), (9, 10, 11)), ((1,), (3,)))]
    assert td._head_groups(a, 12, 2, 1) == [(a.q_heads, a.kv_heads)]
    many = td._head_groups(a, 12, 2, 5)  # more groups than units: the empty ones are dropped
    assert len(many) == 2 and [g[0] for g in many] == [g[0] for g in groups]


def test_assign_heads_errors_name_the_argument():
    with pytest.raises(tessera.TesseraError) as e:
        td.assign_heads([1, 2], 2, 2, "heads")
    assert e.value.argument == "balance"
    with pytest.raises(tessera.TesseraError) as e:
        td.assign_heads([1, 2, 3], 2, 2)
    assert e.value.argument == "num_kv_heads"
    with pytest.raises(tessera.TesseraError) as e:
        td.assign_heads([1, 2], 2, 0)
    assert e.value.argument == "world_size"
    with pytest.raises(tessera.TesseraError) as e:
        td.assign_heads([1, -2], 2, 2)
    assert e.value.argument == "active_blocks"


# ------------------------------------------------------------------------------------- masks, per head

@pytest.fixture
def per_head_mask():
    rng = np.random.default_rng(7)
    dense = rng.random((2, 4, 5, 5)) < np.array([0.1, 0.9, 0.4, 0.0]).reshape(1, 4, 1, 1)
    return dense, rng


def _formats(dense, rng):
    ro, ci = dense_to_csr(dense)
    counts, indices = dense_to_index_lists(dense, rng)
    return {"dense": dense, "dense_torch": torch.from_numpy(dense), "csr": ("csr", ro, ci, dense.shape),
            "csr_torch": ("csr", torch.from_numpy(ro), torch.from_numpy(ci), dense.shape),
            "index_lists": ("index_lists", counts, indices, dense.shape[-1])}


def test_head_active_blocks_of_every_format(per_head_mask):
    dense, rng = per_head_mask
    want = dense.sum(axis=(0, 2, 3)).tolist()
    for name, m in _formats(dense, rng).items():
        assert td.head_active_blocks(m, 4) == want, name
    assert td.head_active_blocks(dense[:, :1], 4) == [int(dense[:, 0].sum())] * 4


def test_slice_mask_selects_the_heads_in_order(per_head_mask):
    dense, rng = per_head_mask
    counts = dense.sum(axis=(0, 2, 3)).tolist()
    heads = (3, 1, 2)
    for name, m in _formats(dense, rng).items():
        spec = tessera.converters.to_mask_spec(m)
        sliced = td._slice_mask(spec, heads, counts)
        assert sliced.kind == spec.kind and sliced.extents[:3] == (2, 3, 5), name
        # the sliced mask, run through the single-process call, equals the dense slice
        q = torch.from_numpy(rng.standard_normal((2, 5 * 16, 3, 64)))
        got = tessera.block_sparse_attention(q, q, q, sliced, 16)
        want = tessera.block_sparse_attention(q, q, q, np.ascontiguousarray(dense[:, list(heads)]), 16)
        assert torch.equal(got, want), name


def test_group_errors_are_raised_without_communication():
    q = torch.zeros((1, 16, 1, 64), dtype=torch.float64)
    if not dist.is_initialized():
        with pytest.raises(tessera.TesseraError) as e:
            td.ulysses_attention(q, q, q, np.ones((1, 1, 1, 1), bool), 16)
        assert e.value.argument == "group" and "init_process_group" in str(e.value)
    with pytest.raises(tessera.TesseraError):
        td.ulysses_attention(q, q, q, np.ones((1, 1, 1, 1), bool), 16, group="world")


def test_lazy_attribute_of_the_package():
    assert tessera.distributed is td


# ----------------------------------------------------------------------------- gloo groups of 2 and 4

@pytest.fixture(scope="module", params=WORLDS, ids=lambda w: f"world{w}")
def world(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"gloo{request.param}")
    return request.param, run_world(request.param, str(out))


@pytest.mark.multiprocess
@pytest.mark.parametrize("balance", BALANCES)
@pytest.mark.parametrize("name", EQUALITY_CASES)
def test_equal_to_the_single_process_call(world, name, balance):
    size, results = world
    rows = results[f"{name}[{balance}]"]
    assert len(rows) == size
    for r, row in enumerate(rows):
        assert row["status"] == "ok", f"rank {r}: {row['status']}: {row['detail']}"


def _errors(world, name, balance):
    size, results = world
    rows = results[f"{name}[{balance}]"]
    for r, row in enumerate(rows):
        assert row["status"] == "raised", f"rank {r}: {row['status']}: {row['detail']}"
    return [row["detail"] for row in rows]


@pytest.mark.multiprocess
@pytest.mark.parametrize("balance", BALANCES)
def test_error_on_one_rank_is_raised_on_every_rank(world, balance):
    errs = _errors(world, "error_one_rank_bad_dtype", balance)
    assert all(e["argument"] == "q" and e["type"] == "TesseraError" for e in errs)
    assert "dtype int32 is not supported on the CPU path" in errs[1]["message"]  # rank 1's own error
    assert all("rank 1 of the group raised an error while checking its arguments" in e["message"]
               for r, e in enumerate(errs) if r != 1)


@pytest.mark.multiprocess
@pytest.mark.parametrize("balance", BALANCES)
def test_disagreeing_ranks_raise_the_same_error(world, balance):
    for name, arg, text in (("error_masks_differ_between_ranks", "block_mask", "active blocks per head"),
                            ("error_heads_differ_between_ranks", "q", "H_q differs between the ranks")):
        errs = _errors(world, name, balance)
        assert len({e["message"] for e in errs}) == 1, name
        assert errs[0]["argument"] == arg and text in errs[0]["message"], errs[0]


@pytest.mark.multiprocess
@pytest.mark.parametrize("balance", BALANCES)
def test_mask_of_a_shard_is_refused(world, balance):
    errs = _errors(world, "error_mask_for_a_shard", balance)
    assert all(e["argument"] == "block_mask" and "the mask covers the full sequences" in e["message"] for e in errs)


@pytest.mark.multiprocess
@pytest.mark.parametrize("balance", BALANCES)
@pytest.mark.parametrize("name, heads", [("error_mask_content_in_local_call", 4),
                                         ("error_mask_content_second_head_group", 8)])
def test_mask_content_error_of_one_rank_reaches_all(world, balance, name, heads):
    errs = _errors(world, name, balance)
    assert all(e["argument"] == "mask.col_indices" for e in errs), errs
    own = [e for e in errs if "in its local attention call" not in e["message"]]
    assert len(own) == 1  # the rank computing the last head raised it; the others name it
    assert "is outside [0, n_kvb = 4)" in own[0]["message"] and "on query heads [" in own[0]["message"]
    assert f"{heads - 1}] of {heads}: head, row and entry numbers count within the mask sliced" in own[0]["message"]


@pytest.mark.multiprocess
def test_invalid_option_raises_on_every_rank(world):
    errs = _errors(world, "error_bad_balance_everywhere", "tiles")
    assert all(e["argument"] == "balance" for e in errs)
