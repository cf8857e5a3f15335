import newt
import newt.language as nl


def get_configs():
    return [
        newt.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                                 (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (32, 64, 32, 5, 2)]
    ]


@newt.jit
def leaky_relu(x):
    return nl.where(x >= 0, x, 0.01 * x)


@newt.autotune(configs=get_configs(), key=["M", "N", "K"])
@newt.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: nl.constexpr, BLOCK_N: nl.constexpr, BLOCK_K: nl.constexpr,
                  GROUP_M: nl.constexpr, ACTIVATION: nl.constexpr):
    pid = nl.program_id(axis=0)
    num_pid_m = nl.cdiv(M, BLOCK_M)
    num_pid_n = nl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M) if False else nl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + nl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + nl.arange(0, BLOCK_N)) % N
    offs_k = nl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = nl.zeros((BLOCK_M, BLOCK_N), dtype=nl.float32)
    for k in range(0, nl.cdiv(K, BLOCK_K)):
        a = nl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = nl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = nl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(nl.float16)

    offs_cm = pid_m * BLOCK_M + nl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + nl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    nl.store(c_ptrs, c, mask=c_mask)


def matmul(a, b, c, activation=""):
    M, K = a.shape
    K, N = b.shape
    grid = lambda META: (newt.cdiv(M, META["BLOCK_M"]) * newt.cdiv(N, META["BLOCK_N"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), ACTIVATION=activation)
