import newt
import newt.language as nl


@newt.jit
def _attn_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, stride_kn, stride_vn, N_CTX,
                BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, STAGE: nl.constexpr, offs_m, offs_n):
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    else:
        lo, hi = 0, N_CTX
    K_ptrs = K_block_ptr + lo * stride_kn
    V_ptrs = V_block_ptr + lo * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        k = nl.load(K_ptrs)
        qk = nl.dot(q, k)
        if STAGE == 2:
            mask = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + nl.where(mask, 0, -1.0e6)
            m_ij = nl.maximum(m_i, nl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = nl.maximum(m_i, nl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = nl.math.exp2(qk)
        l_ij = nl.sum(p, 1)
        alpha = nl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = nl.load(V_ptrs)
        p = p.to(nl.float16)
        acc = nl.dot(p, v, acc)
        m_i = m_ij
        K_ptrs += BLOCK_N * stride_kn
        V_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@newt.jit
def attn_fwd(Q, K, V, sm_scale, Out, stride_qm, stride_kn, stride_vn, stride_om, N_CTX,
             HEAD_DIM: nl.constexpr, BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, STAGE: nl.constexpr):
    start_m = nl.program_id(0)
    off_hz = nl.program_id(1)
    base = off_hz * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_n = nl.arange(0, BLOCK_N)
    offs_d = nl.arange(0, HEAD_DIM)
    q = nl.load(Q + base + offs_m[:, None] * stride_qm + offs_d[None, :])
    K_ptrs = K + base + offs_n[None, :] * stride_kn + offs_d[:, None]
    V_ptrs = V + base + offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = nl.zeros([BLOCK_M], dtype=nl.float32) - float("inf")
    l_i = nl.zeros([BLOCK_M], dtype=nl.float32) + 1.0
    acc = nl.zeros([BLOCK_M, HEAD_DIM], dtype=nl.float32)
    qk_scale = sm_scale * 1.44269504
    if STAGE & 1:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_ptrs, V_ptrs, start_m, qk_scale, stride_kn, stride_vn,
                                    N_CTX, BLOCK_M, BLOCK_N, 4 - STAGE, offs_m, offs_n)
    if STAGE & 2:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, K_ptrs, V_ptrs, start_m, qk_scale, stride_kn, stride_vn,
                                    N_CTX, BLOCK_M, BLOCK_N, 2, offs_m, offs_n)
    acc = acc / l_i[:, None]
    nl.store(Out + base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(nl.float16))


def attention(q, k, v, o, sm_scale, causal):
    stage = 3 if causal else 1
    attn_fwd[(q.shape[2] // 128, q.shape[0] * q.shape[1])](
        q, k, v, sm_scale, o, q.stride(2), k.stride(2), v.stride(2), o.stride(2), q.shape[2],
        HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, STAGE=stage)
