// The fast float32 matmul: C[b] = A[b] @ B[b], register-blocked and tiled.
// A work-group computes a TSM x TSN tile of C with (TSN/WPTN) x (TSM/WPTM) work-items; each
// work-item keeps a WPTM x WPTN block of C in registers. Per TSK-step the group stages a
// TSM x TSK tile of A and a TSK x TSN tile of B in local memory with 4-wide vector loads from
// whichever dim of A and of B is contiguous (so a transposed weight is read in place), then
// every work-item reads 4-wide vectors of both back and does WPTM * WPTN multiply-adds per k.
// Work-item (tn, tm) owns rows (tm + i * TSM/WPTM) * 4 + e and columns (tn + j * TSN/WPTN)
// * 4 + e: neighbouring work-items read neighbouring vectors of local memory (no bank
// conflicts) and write neighbouring vectors of C (coalesced).
// Tile sizes come from a short tuning at first use on each device (tuning.py).
// #defines: T, T4, TSM, TSN, TSK, WPTM, WPTN, A_KCONT (A is contiguous along k, else along m),
//   B_NCONT (B is contiguous along n, else along k), EVEN (every dim is a multiple of its tile:
//   no bounds checks), ALIGNED (vector loads of A and B are 16-byte aligned), NB (batch dims).
// The host checks that NT divides both tiles' vector counts. Layout: as matmul.cl.

#define RTM (TSM / WPTM)
#define RTN (TSN / WPTN)
#define NT (RTM * RTN)
#define APAD (A_KCONT ? 1 : 0)   // a vector of padding where A is stored transposed
#define BPAD (B_NCONT ? 0 : 1)
#define AROW (TSM / 4 + APAD)
#define BROW (TSN / 4 + BPAD)

#define BSHAPE(d) L.v[9 + (d)]
#define BSTRIDE(k, d) L.v[9 + NB * (1 + (k)) + (d)]

#if ALIGNED
#define VLOAD(p, o) (*(__global const T4*)((p) + (o)))
#else
#define VLOAD(p, o) vload4(0, (p) + (o))
#endif

// four consecutive elements from p + o, of which `count` exist (the rest read as 0)
inline T4 load4(__global const T* p, IDX o, IDX count)
{
#if EVEN
    return VLOAD(p, o);
#else
    if (count >= 4)
        return VLOAD(p, o);
    T4 v = (T4)(0);
    if (count > 0)
        v.s0 = p[o];
    if (count > 1)
        v.s1 = p[o + 1];
    if (count > 2)
        v.s2 = p[o + 2];
    return v;
#endif
}

__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void gemm(__global T* C, __global const T* A, __global const T* B, const layout_t L)
{
    __local T4 As[TSK][AROW];
    __local T4 Bs[TSK][BROW];
    __local T* as = (__local T*)As;
    __local T* bs = (__local T*)Bs;

    const IDX M = L.v[0], N = L.v[1], K = L.v[2];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTN + tn;
    const IDX m0 = get_group_id(1) * TSM, n0 = get_group_id(0) * TSN;
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
#if A_KCONT
    const IDX sa = L.v[5];   // A's row stride
#else
    const IDX sa = L.v[6];   // A's k stride
#endif
#if B_NCONT
    const IDX sb = L.v[7];   // B's k stride
#else
    const IDX sb = L.v[8];   // B's column stride
#endif

    T4 acc[WPTM][WPTN / 4];
#pragma unroll
    for (int i = 0; i < WPTM; ++i)
#pragma unroll
        for (int j = 0; j < WPTN / 4; ++j)
            acc[i][j] = (T4)(0);

    for (IDX k0 = 0; k0 < K; k0 += TSK) {
        // stage the A tile as As[k][m]
#pragma unroll
        for (int r = 0; r < TSM * TSK / 4 / NT; ++r) {
            const int v = tid + r * NT;
#if A_KCONT
            const int row = v / (TSK / 4), kq = v % (TSK / 4);
            const IDX gm = m0 + row, gk = k0 + kq * 4;
            const T4 a = load4(A, oa + gm * sa + gk, gm < M ? K - gk : 0);
            as[(kq * 4 + 0) * AROW * 4 + row] = a.s0;
            as[(kq * 4 + 1) * AROW * 4 + row] = a.s1;
            as[(kq * 4 + 2) * AROW * 4 + row] = a.s2;
            as[(kq * 4 + 3) * AROW * 4 + row] = a.s3;
#else
            const int k = v / (TSM / 4), mq = v % (TSM / 4);
            const IDX gm = m0 + mq * 4, gk = k0 + k;
            As[k][mq] = load4(A, oa + gm + gk * sa, gk < K ? M - gm : 0);
#endif
        }
        // stage the B tile as Bs[k][n]
#pragma unroll
        for (int r = 0; r < TSN * TSK / 4 / NT; ++r) {
            const int v = tid + r * NT;
#if B_NCONT
            const int k = v / (TSN / 4), nq = v % (TSN / 4);
            const IDX gk = k0 + k, gn = n0 + nq * 4;
            Bs[k][nq] = load4(B, ob + gk * sb + gn, gk < K ? N - gn : 0);
#else
            const int col = v / (TSK / 4), kq = v % (TSK / 4);
            const IDX gn = n0 + col, gk = k0 + kq * 4;
            const T4 b = load4(B, ob + gn * sb + gk, gn < N ? K - gk : 0);
            bs[(kq * 4 + 0) * BROW * 4 + col] = b.s0;
            bs[(kq * 4 + 1) * BROW * 4 + col] = b.s1;
            bs[(kq * 4 + 2) * BROW * 4 + col] = b.s2;
            bs[(kq * 4 + 3) * BROW * 4 + col] = b.s3;
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int k = 0; k < TSK; ++k) {
            T4 a[WPTM / 4], b[WPTN / 4];
#pragma unroll
            for (int i = 0; i < WPTM / 4; ++i)
                a[i] = As[k][tm + i * RTM];
#pragma unroll
            for (int j = 0; j < WPTN / 4; ++j)
                b[j] = Bs[k][tn + j * RTN];
#pragma unroll
            for (int i = 0; i < WPTM / 4; ++i)
#pragma unroll
                for (int j = 0; j < WPTN / 4; ++j) {
                    acc[i * 4 + 0][j] += a[i].s0 * b[j];
                    acc[i * 4 + 1][j] += a[i].s1 * b[j];
                    acc[i * 4 + 2][j] += a[i].s2 * b[j];
                    acc[i * 4 + 3][j] += a[i].s3 * b[j];
                }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < WPTM / 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const IDX row = m0 + (tm + i * RTM) * 4 + e;
#pragma unroll
            for (int j = 0; j < WPTN / 4; ++j) {
                const IDX col = n0 + (tn + j * RTN) * 4;
                const T4 c = acc[i * 4 + e][j];
#if EVEN
                vstore4(c, 0, C + oc + row * N + col);
#else
                if (row < M) {
                    __global T* out = C + oc + row * N + col;
                    if (col + 3 < N) {
                        vstore4(c, 0, out);
                    } else {
                        if (col < N) out[0] = c.s0;
                        if (col + 1 < N) out[1] = c.s1;
                        if (col + 2 < N) out[2] = c.s2;
                    }
                }
#endif
            }
        }
}
