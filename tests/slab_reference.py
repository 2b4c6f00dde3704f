"""The slab attention as first written, out of place with the mask repeated per query head: the reference that
`tests/test_policies.py` and `benchmarks/sampler_profile.py` hold HFPolicy's in-place attention to, bit for bit."""

import torch
from thinkingbox_training.policies import _at_least_rows


def plain_slab_attention(module, query, key, value, attention_mask, scaling: float = None, slab=None, **kw):
    "The slab attention as first written (out of place, the mask repeated per query head): the reference."
    B, H, Q, D = query.shape
    G = key.shape[1]
    R = H // G
    q = query.reshape(B, G, R * Q, D) * scaling
    mask = attention_mask.repeat(1, 1, R, 1) if R > 1 else attention_mask
    s = (q @ key.transpose(-1, -2)).masked_fill(~mask, float('-inf'))
    m = s.amax(-1, keepdim=True)
    e = (s - m).exp()
    l, o = e.sum(-1, keepdim=True), e @ value
    for (pk, pv), rows in slab.groups(module.layer_idx, B):
        b = len(rows)
        qg = q[rows].transpose(0, 1).reshape(G, -1, D).to(pk.dtype)
        n = qg.shape[1]  # padded to the sampler's MIN_ROWS rows as it pads them: what differs is in place or not
        sp = _at_least_rows(qg) @ pk[0].transpose(-1, -2)
        mp = sp.amax(-1, keepdim=True)
        ep = (sp - mp).exp()
        lp, op = ep.sum(-1, keepdim=True)[:, :n], (ep @ pv[0])[:, :n]
        mp, lp, op = (t[:, :n].reshape(G, b, R * Q, -1).transpose(0, 1).to(q.dtype) for t in (mp, lp, op))
        mr = torch.maximum(m[rows], mp)
        a, c = (m[rows] - mr).exp(), (mp - mr).exp()
        l[rows], o[rows] = l[rows] * a + lp * c, o[rows] * a + op * c
    return (o / l).view(B, H, Q, D).transpose(1, 2).contiguous(), None
