// The float32 matmul for CPU devices (PoCL): C = A @ B from packed copies of A and B.
// A CPU runs a work-group's items one after another, so the GPU kernel's local-memory tiles
// and barriers only add work there. Instead, as BLAS does:
//   pack: A into panels [M / RM][K][RM] and B into panels [N / (2 VW)][K][2 VW] (zeros past
//         the edges), so the micro-kernel streams both from contiguous memory (B read in
//         place walks a new page per k);
//   gemm_cpu: one work-item per work-group computes an RM x (2 VW) block of C in 2 RM vector
//         registers (6 x 16 floats: 12 AVX2 accumulators, 2 registers of B and one of A,
//         the BLAS micro-kernel's shape; 8 rows spill): per k, two vector loads of B's panel,
//         RM broadcasts from A's panel, 2 RM vector multiply-adds. Work-groups that share a
//         B panel run one after another (dim 0 walks m), so it stays in the cache.
// On a 2-core EPYC (PoCL, 1024^3): 10 GFLOP/s read in place, 20 packed, ~100 with B's loads
// inlined (below).
// #defines: T, TV (vector of VW T), VW, VSTORE (vstoreVW), RM.

// out[r / BLK][c][r % BLK] = src[offset + r * sr + c * sc], 0 for r >= rows.
// Layout: rows, cols, sr, sc, offset, BLK, padded rows.
__kernel void pack(__global T* out, __global const T* src, const layout_t L)
{
    const IDX i = get_global_id(0);
    const IDX rows = L.v[0], cols = L.v[1], blk = L.v[5];
    if (i >= L.v[6] * cols)
        return;
    // i walks the packed buffer in order: block, then column, then row within the block
    const IDX r_in = i % blk, c = (i / blk) % cols, block = i / (blk * cols);
    const IDX r = block * blk + r_in;
    out[i] = r < rows ? src[L.v[4] + r * L.v[2] + c * L.v[3]] : (T)0;
}

// Layout: M, N, K.
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void gemm_cpu(__global T* C, __global const T* A, __global const T* B, const layout_t L)
{
    const IDX M = L.v[0], N = L.v[1], K = L.v[2];
    const IDX m0 = get_group_id(0) * RM, n0 = get_group_id(1) * (2 * VW);
    __global const T* a = A + (m0 / RM) * K * RM;
    __global const T* b = B + (n0 / (2 * VW)) * K * (2 * VW);
    TV acc[RM][2];
#pragma unroll
    for (int r = 0; r < RM; ++r)
        acc[r][0] = acc[r][1] = (TV)(0);
    for (IDX k = 0; k < K; ++k) {
        // vector loads by pointer: PoCL calls vloadn() as a function, not inlined (two calls
        // per k halved the speed); the packed panels are aligned to whole vectors
        __global const TV* bk = (__global const TV*)(b + k * (2 * VW));
        const TV b0 = bk[0], b1 = bk[1];
#pragma unroll
        for (int r = 0; r < RM; ++r) {
            const TV x = (TV)(a[k * RM + r]);
            acc[r][0] += x * b0;
            acc[r][1] += x * b1;
        }
    }
    __global T* c = C + m0 * N + n0;
    if (m0 + RM <= M && n0 + 2 * VW <= N) {
#pragma unroll
        for (int r = 0; r < RM; ++r) {
            VSTORE(acc[r][0], 0, c + r * N);
            VSTORE(acc[r][1], 0, c + r * N + VW);
        }
        return;
    }
    for (int r = 0; r < RM && m0 + r < M; ++r) {  // an edge block: only what lies inside C
        T row[2 * VW];
        VSTORE(acc[r][0], 0, row);
        VSTORE(acc[r][1], 0, row + VW);
        for (int j = 0; j < 2 * VW && n0 + j < N; ++j)
            c[r * N + j] = row[j];
    }
}
