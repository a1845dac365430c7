// The fast float32 matmul: C[b] = A[b] @ B[b], register-blocked and tiled.
// A work-group computes a TSM x TSN tile of C with (TSN/WPTN) x (TSM/WPTM) work-items; each
// work-item keeps a WPTM x WPTN block of C in registers. Per TSK-step the group stages a
// TSM x TSK tile of A and a TSK x TSN tile of B in local memory with 4-wide vector loads from
// whichever dim of A and of B is contiguous (so a transposed weight is read in place), then
// every work-item reads 4-wide vectors of both back and does WPTM * WPTN multiply-adds per k.
// Two local buffers, and the next tiles fetched into registers before the current ones are
// multiplied: global latency hides behind the arithmetic, with one barrier per k-step.
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

#define A_VECS (TSM * TSK / 4 / NT)   // vectors of the A tile each work-item moves
#define B_VECS (TSN * TSK / 4 / NT)

// global -> registers: this work-item's share of the A and B tiles starting at k0
inline void fetch(T4* ra, T4* rb, __global const T* A, __global const T* B, IDX oa, IDX ob,
                  IDX sa, IDX sb, IDX m0, IDX n0, IDX k0, IDX M, IDX N, IDX K, int tid)
{
#pragma unroll
    for (int r = 0; r < A_VECS; ++r) {
        const int v = tid + r * NT;
#if A_KCONT
        const IDX gm = m0 + v / (TSK / 4), gk = k0 + (v % (TSK / 4)) * 4;
        ra[r] = load4(A, oa + gm * sa + gk, gm < M ? K - gk : 0);
#else
        const IDX gm = m0 + (v % (TSM / 4)) * 4, gk = k0 + v / (TSM / 4);
        ra[r] = load4(A, oa + gm + gk * sa, gk < K ? M - gm : 0);
#endif
    }
#pragma unroll
    for (int r = 0; r < B_VECS; ++r) {
        const int v = tid + r * NT;
#if B_NCONT
        const IDX gk = k0 + v / (TSN / 4), gn = n0 + (v % (TSN / 4)) * 4;
        rb[r] = load4(B, ob + gk * sb + gn, gk < K ? N - gn : 0);
#else
        const IDX gn = n0 + v / (TSK / 4), gk = k0 + (v % (TSK / 4)) * 4;
        rb[r] = load4(B, ob + gn * sb + gk, gn < N ? K - gk : 0);
#endif
    }
}

// registers -> one local buffer, stored as As[k][m] and Bs[k][n]
inline void stash(__local T4* as4, __local T4* bs4, const T4* ra, const T4* rb, int tid)
{
    __local T* as = (__local T*)as4;
    __local T* bs = (__local T*)bs4;
#pragma unroll
    for (int r = 0; r < A_VECS; ++r) {
        const int v = tid + r * NT;
#if A_KCONT
        const int row = v / (TSK / 4), k = (v % (TSK / 4)) * 4;
        as[(k + 0) * AROW * 4 + row] = ra[r].s0;
        as[(k + 1) * AROW * 4 + row] = ra[r].s1;
        as[(k + 2) * AROW * 4 + row] = ra[r].s2;
        as[(k + 3) * AROW * 4 + row] = ra[r].s3;
#else
        as4[(v / (TSM / 4)) * AROW + v % (TSM / 4)] = ra[r];
#endif
    }
#pragma unroll
    for (int r = 0; r < B_VECS; ++r) {
        const int v = tid + r * NT;
#if B_NCONT
        bs4[(v / (TSN / 4)) * BROW + v % (TSN / 4)] = rb[r];
#else
        const int col = v / (TSK / 4), k = (v % (TSK / 4)) * 4;
        bs[(k + 0) * BROW * 4 + col] = rb[r].s0;
        bs[(k + 1) * BROW * 4 + col] = rb[r].s1;
        bs[(k + 2) * BROW * 4 + col] = rb[r].s2;
        bs[(k + 3) * BROW * 4 + col] = rb[r].s3;
#endif
    }
}

__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void gemm(__global T* C, __global const T* A, __global const T* B, const layout_t L)
{
    __local T4 As[2][TSK * AROW];
    __local T4 Bs[2][TSK * BROW];

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
    const IDX sa = A_KCONT ? L.v[5] : L.v[6];   // A's stride along its non-contiguous dim
    const IDX sb = B_NCONT ? L.v[7] : L.v[8];   // likewise for B

    T4 acc[WPTM][WPTN / 4];
#pragma unroll
    for (int i = 0; i < WPTM; ++i)
#pragma unroll
        for (int j = 0; j < WPTN / 4; ++j)
            acc[i][j] = (T4)(0);

    T4 ra[A_VECS], rb[B_VECS];
    fetch(ra, rb, A, B, oa, ob, sa, sb, m0, n0, 0, M, N, K, tid);
    stash(As[0], Bs[0], ra, rb, tid);
    barrier(CLK_LOCAL_MEM_FENCE);

    int buf = 0;
    for (IDX k0 = 0; k0 < K; k0 += TSK) {
        const int more = k0 + TSK < K;
        if (more)  // the next tiles' loads are in flight while this tile is multiplied
            fetch(ra, rb, A, B, oa, ob, sa, sb, m0, n0, k0 + TSK, M, N, K, tid);
        __local const T4* as4 = As[buf];
        __local const T4* bs4 = Bs[buf];
#pragma unroll
        for (int k = 0; k < TSK; ++k) {
            T4 a[WPTM / 4], b[WPTN / 4];
#pragma unroll
            for (int i = 0; i < WPTM / 4; ++i)
                a[i] = as4[k * AROW + tm + i * RTM];
#pragma unroll
            for (int j = 0; j < WPTN / 4; ++j)
                b[j] = bs4[k * BROW + tn + j * RTN];
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
        // the other buffer was last read before the previous barrier: safe to overwrite
        if (more)
            stash(As[buf ^ 1], Bs[buf ^ 1], ra, rb, tid);
        barrier(CLK_LOCAL_MEM_FENCE);
        buf ^= 1;
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
