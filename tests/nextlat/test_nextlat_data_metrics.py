import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.nextlat import data
from neurips26.nextlat.metrics import effective_rank, probe_accuracy, speedup_bound, token_probe_accuracy


def test_effective_rank_identities():
    assert abs(effective_rank(np.eye(7)) - 7) < 1e-6
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(20, 1)), rng.normal(size=(1, 9))
    assert abs(effective_rank(u @ v) - 1) < 1e-6
    H = rng.normal(size=(30, 8))
    assert effective_rank(H, center=True) < 8.0


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=-1e3, max_value=1e3).filter(lambda c: abs(c) > 1e-3), st.integers(0, 10_000))
def test_effective_rank_scale_invariant(c, seed):
    H = np.random.default_rng(seed).normal(size=(12, 5))
    assert abs(effective_rank(c * H) - effective_rank(H)) < 1e-8


def test_probe_recovers_linear_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    assert probe_accuracy(X[:300], y[:300], X[300:], y[300:]) > 0.9
    assert speedup_bound(2.0, 4, 0.0) == 2.0 and speedup_bound(3.0, 4, 0.0) == 2.5


def test_city_walks_legal_and_end_at_goal():
    g = data.city_grid(5, seed=1)
    ids, states = data.city_walks(g, 200, 24, seed=2)
    for row, srow in zip(ids, states):
        assert data.walk_is_legal(g, row)
        n = int((row != g.pad).sum())
        assert row[n - 1] == g.eos and srow[n - 1] == row[1] and srow[0] == row[0]
        u = row[0]
        for t in range(2, n - 1):     # states follow the directed edges
            u = g.edges[u][row[t] - g.move_base]
            assert srow[t] == u
        assert 8 + 3 <= n <= 24
    ids2, _ = data.city_walks(g, 200, 24, seed=2)
    assert np.array_equal(ids, ids2)
    bad = ids[0].copy()
    bad[2] = g.move_base + next(k for k in range(4) if k not in g.edges[int(bad[0])])
    assert not data.walk_is_legal(g, bad)


def test_city_grid_strongly_connected():
    import networkx as nx
    g = data.city_grid(6, seed=3)
    G = nx.DiGraph([(u, v) for u, out in g.edges.items() for v in out.values()])
    assert nx.is_strongly_connected(G) and set(G.nodes) == set(g.nodes)


def test_path_star_invariants():
    for i in range(20):
        ps = data.path_star(5, 5, 50, i)
        assert len(ps.edges) == 5 * 4
        nodes = {x for e in ps.edges for x in e}
        assert len(nodes) == 5 * 4 + 1 and max(nodes) < 50
        assert ps.path[0] == ps.source and ps.path[-1] == ps.goal and len(ps.path) == 5
        assert all((a, b) in set(ps.edges) for a, b in zip(ps.path, ps.path[1:]))
        assert data.path_star(5, 5, 50, i) == ps
    assert data.path_star(2, 5, 50, 0) != data.path_star(2, 5, 50, 1)


def test_group_targets_are_running_products():
    els = data.group_elements("A5")
    assert len(els) == 60 and len(data.group_elements("S3")) == 6
    x, y = data.group_words("S3", 50, 10, seed=0)
    els = data.group_elements("S3")
    for xi, yi in zip(x, y):
        # independent check: permutation matrices, M_a e_i = e_{a(i)}, so M_a M_b = M_{a o b}
        P = np.eye(3)
        for a, b in zip(xi, yi):
            P = P @ np.eye(3)[list(els[a])].T
            assert tuple(int(v) for v in P.argmax(0)) == els[b]


def test_bad_generator_parameters():
    with pytest.raises(ValueError, match="M"):
        data.path_star(5, 5, 20, 0)
    with pytest.raises(ValueError, match="n"):
        data.city_grid(1)
    with pytest.raises(ValueError, match="T"):
        data.city_walks(data.city_grid(3), 5, 10)
    with pytest.raises(ValueError, match="group"):
        data.group_elements("S4")


def test_token_probes_find_the_encoded_offset():
    """h_t encodes x_{t+3} (one-hot + noise): the k = 3 probe is near perfect, other k near chance."""
    rng = np.random.default_rng(0)
    N, T, V = 60, 30, 5
    ids = rng.integers(0, V, size=(N, T))
    H = rng.normal(scale=0.2, size=(N, T, 8))
    H[:, : T - 3, :V] += np.eye(V)[ids[:, 3:]]
    acc = token_probe_accuracy(H, ids, [1, 2, 3, 4])
    assert acc[3] > 0.95 and max(acc[1], acc[2], acc[4]) < 0.4
    valid = np.ones((N, T), bool)
    valid[:, 20:] = False                                   # masked tokens are never targets
    assert token_probe_accuracy(H, ids, [3], valid=valid)[3] > 0.95
    with pytest.raises(ValueError, match="ks"):
        token_probe_accuracy(H, ids, [0])
    with pytest.raises(ValueError, match="ids"):
        token_probe_accuracy(H, ids[:, :5], [1])


def test_bpe_is_lossless_deterministic_and_trained_on_the_training_split():
    text = "".join(f"line {i}: to be or not to be, that is the question {i % 7}\n" for i in range(400))
    text += "ZZZZ QQQQ unseen words only here\n" * 20          # only in the held-out tail
    b = data.bpe_data(text, vocab_size=300, holdout=0.05)
    cut = int(len(text) * 0.95)
    assert b.vocab == 300 and b.train.max() < b.vocab and b.test.max() < b.vocab
    assert b.decode(b.train) == text[:cut] and b.decode(b.test) == text[cut:]   # byte-level: lossless
    assert np.array_equal(b.train, data.bpe_data(text, vocab_size=300, holdout=0.05).train)
    assert len(b.train) < 0.6 * cut                          # merges compress the training text
    per_char_test = len(b.test) / (len(text) - cut)
    assert per_char_test > len(b.train) / cut                # unseen text compresses worse: no test leakage
    with pytest.raises(ValueError, match="vocab_size"):
        data.bpe_data(text, vocab_size=100)
