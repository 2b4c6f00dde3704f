"""The slab attention as first written, out of place with the mask repeated per query head: the reference that
`tests/test_policies.py` and `benchmarks/sampler_profile.py` hold HFPolicy's in-place attention to, bit for bit.
Its products are shaped as the sampler shapes them (few query rows padded to MIN_ROWS, own columns summed in blocks
of WIDTH_STEP), since those shapes decide the last bits: what differs is only in place or not."""

import torch
from thinkingbox_training.policies import MIN_ROWS, WIDTH_STEP, _at_least_rows


def plain_slab_attention(module, query, key, value, attention_mask, scaling: float = None, slab=None, **kw):
    "The slab attention as first written (out of place, the mask repeated per query head): the reference."
    B, H, Q, D = query.shape
    G = key.shape[1]
    R = H // G
    rq = R * Q
    q = query.reshape(B, G, rq, D) * scaling
    mask = attention_mask.repeat(1, 1, R, 1) if R > 1 else attention_mask
    if rq < MIN_ROWS:
        q = _at_least_rows(q)
        mask = torch.cat([mask, mask[:, :, :1].expand(B, 1, q.shape[2] - rq, -1)], 2)
    rp = q.shape[2]
    s = (q @ key.transpose(-1, -2)).masked_fill(~mask, float('-inf'))
    m = s.amax(-1, keepdim=True)
    e = (s - m).exp()
    l = o = None
    for j in range(0, e.shape[-1], WIDTH_STEP):
        lj, oj = (
            e[..., j : j + WIDTH_STEP].sum(-1, keepdim=True),
            e[..., j : j + WIDTH_STEP] @ value[..., j : j + WIDTH_STEP, :],
        )
        l, o = (lj, oj) if l is None else (l + lj, o + oj)
    for (pk, pv), rows in slab.groups(module.layer_idx, B):
        b = len(rows)
        qg = q[rows].transpose(0, 1).reshape(G, -1, D).to(pk.dtype)
        n = qg.shape[1]
        sp = _at_least_rows(qg) @ pk[0].transpose(-1, -2)
        mp = sp.amax(-1, keepdim=True)
        ep = (sp - mp).exp()
        lp, op = ep.sum(-1, keepdim=True)[:, :n], (ep @ pv[0])[:, :n]
        mp, lp, op = (t[:, :n].reshape(G, b, rp, -1).transpose(0, 1).to(q.dtype) for t in (mp, lp, op))
        mr = torch.maximum(m[rows], mp)
        a, c = (m[rows] - mr).exp(), (mp - mr).exp()
        l[rows], o[rows] = l[rows] * a + lp * c, o[rows] * a + op * c
    return (o / l)[:, :, :rq].reshape(B, H, Q, D).transpose(1, 2).contiguous(), None
