// The general batched matmul, for every dtype and any strides (transposed or broadcast
// operands are read in place): C[b] = A[b] @ B[b] with 16 x 16 tiles staged in local memory.
// float32 products large enough to pay go to gemm.cl instead.
// #defines: T, TS (tile), NB (collapsed batch dims).
// Layout: v = M, N, K, A offset, B offset, A row/col strides, B row/col strides | batch
// shape[NB], A, B and C batch strides [NB] each (C itself is contiguous).

#define BSHAPE(d) L.v[9 + (d)]
#define BSTRIDE(k, d) L.v[9 + NB * (1 + (k)) + (d)]

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void matmul(__global T* C, __global const T* A, __global const T* B, const layout_t L)
{
    __local T As[TS][TS];
    __local T Bs[TS][TS + 1];
    const IDX M = L.v[0], N = L.v[1], K = L.v[2];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const IDX n = get_group_id(0) * TS + tn;
    const IDX m = get_group_id(1) * TS + tm;
    IDX oa = L.v[3], ob = L.v[4], oc = 0;
#if NB > 0
    IDX rest = get_group_id(2);
    for (int d = NB - 1; d >= 0; --d) {
        const IDX c = rest % BSHAPE(d);
        rest /= BSHAPE(d);
        oa += c * BSTRIDE(0, d);
        ob += c * BSTRIDE(1, d);
        oc += c * BSTRIDE(2, d);
    }
#endif
    const IDX sam = L.v[5], sak = L.v[6], sbk = L.v[7], sbn = L.v[8];
    T acc = 0;
    for (IDX k0 = 0; k0 < K; k0 += TS) {
        const IDX ka = k0 + tn, kb = k0 + tm;
        As[tm][tn] = (m < M && ka < K) ? A[oa + m * sam + ka * sak] : (T)0;
        Bs[tm][tn] = (kb < K && n < N) ? B[ob + kb * sbk + n * sbn] : (T)0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k)
            acc += As[tm][k] * Bs[k][tn];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N)
        C[oc + m * N + n] = acc;
}
