import torch

from neurips26.njord.layers import InteractionNet, PropagationNet, scatter_mean, scatter_sum

EI = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 2], [1, 2, 3, 4, 5, 0, 3, 5]])


def test_scatter_matches_dense():
    msg = torch.randn(2, EI.shape[1], 3, dtype=torch.float64)
    A = torch.zeros(6, EI.shape[1], dtype=torch.float64)
    A[EI[1], torch.arange(EI.shape[1])] = 1
    torch.testing.assert_close(scatter_sum(msg, EI[1], 6), torch.einsum("ne,bed->bnd", A, msg))
    deg = A.sum(1).clamp(min=1)
    torch.testing.assert_close(
        scatter_mean(msg, EI[1], 6), torch.einsum("ne,bed->bnd", A, msg) / deg[None, :, None]
    )


def test_gradcheck_both_layers():
    torch.manual_seed(0)
    for cls in (InteractionNet, PropagationNet):
        net = cls(EI, 4, 6).double()
        h = torch.randn(1, 6, 4, dtype=torch.float64, requires_grad=True)
        e = torch.randn(EI.shape[1], 4, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda h, e: net(h, h, e)[0], (h, e))


def test_permutation_equivariance():
    torch.manual_seed(0)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    inv = torch.argsort(perm)  # new index of old node i is inv[i]
    for cls in (InteractionNet, PropagationNet):
        net = cls(EI, 4, 6)
        h, e = torch.randn(2, 6, 4), torch.randn(EI.shape[1], 4)
        out, _ = net(h, h, e)
        net_p = cls(inv[EI], 4, 6)
        net_p.load_state_dict(net.state_dict())
        out_p, _ = net_p(h[:, perm], h[:, perm], e)
        torch.testing.assert_close(out_p, out[:, perm], atol=1e-5, rtol=1e-5)


def test_split_first_linear_equals_concatenated_mlps():
    """The block-split first Linear (per-node projections gathered to edges, no concatenation) is the
    spec's ``MLP_e([e, h_s, h_r])`` and ``MLP_n([h_r, a_r])``, for static (E, d) and batched edges."""
    torch.manual_seed(0)
    s, r = EI
    for cls in (InteractionNet, PropagationNet):
        net = cls(EI, 4, 6).double()
        send, recv = torch.randn(3, 6, 4, dtype=torch.float64), torch.randn(3, 6, 4, dtype=torch.float64)
        for e in (torch.randn(EI.shape[1], 4, dtype=torch.float64), torch.randn(3, EI.shape[1], 4, dtype=torch.float64)):
            eb = e.expand(3, -1, -1)
            m_ref = net.edge_mlp(torch.cat([eb, send[:, s], recv[:, r]], -1))
            out, e_new = net(send, recv, e)
            if cls is PropagationNet:
                m_ref = m_ref + send[:, s]
                agg = scatter_mean(m_ref, r, 6)
                ref = agg + net.node_mlp(torch.cat([recv, agg], -1))
            else:
                agg = scatter_sum(m_ref, r, 6)
                ref = recv + net.node_mlp(torch.cat([recv, agg], -1))
            torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-12)
            torch.testing.assert_close(e_new, eb + m_ref, atol=1e-12, rtol=1e-12)
