// conv2d and its two gradients as one implicit GEMM: C[m, n] = sum_k A[m, k] B[k, n] per group,
// where one of A and B is im2col (or its gather-per-input-element adjoint) read straight from
// the image through two small index tables instead of being written out first.
//
//   FORWARD      m = output channel, n = output pixel (image, oy, ox), k = tap (c, i, j):
//                A = weight (O, Cg * kh * kw), B[k, n] = x at tap k of pixel n (0 in padding)
//   GRAD_INPUT   m = input channel, n = input pixel (image, y, x), k = (o, i, j):
//                A[m, k] = weight[g * Og + o, m, i, j], B[k, n] = grad_output at the output
//                pixel whose tap (i, j) lands on n (0 where none does: strides, borders)
//   GRAD_WEIGHT  m = output channel, n = tap (c, i, j), k = output pixel (image, oy, ox):
//                A[m, k] = grad_output, B[k, n] = x at tap n of pixel k
//
// Tables (int4, built once per geometry on the host):
//   pixel (FORWARD, GRAD_WEIGHT): (offset in x of the window's corner, its row, its column,
//       offset of the pixel in the output / grad_output without the channel);
//   tap: (offset from a window's corner in x, i * dh, j * dw, 0);
//   input pixel (GRAD_INPUT): (offset of the image in grad_output, y + ph, x + pw, offset of
//       the pixel in grad_input without the channel);  its k table: (o * OH * OW, i * dh,
//       j * dw, offset of weight[o, 0, i, j] in the group's weights).
// With SPLIT > 1 chunks of k, chunk s writes its own copy of C (a later launch adds them in a
// fixed order): every sum has a fixed order, so results are bitwise the same run to run.
//
// The tile: TM x TN of C per work-group of (TN / WPT) x (TM / WPT) work-items, each holding a
// WPT x WPT block in registers at rows tm + i * TM/WPT and columns tn + j * TN/WPT (neighbouring
// work-items read neighbouring words of local memory and write neighbouring outputs).
// #defines: T, MODE (1, 2, 3 as above), TM, TN, TK, WPT (conv.tile() picks them; the loads
// divide evenly among the work-items when TM * TN / WPT^2 is a multiple of TN and of TK and
// divides TM * TK and TK * TN), UNIT_STRIDE (GRAD_INPUT with stride (1, 1): no division).
// The sum over k runs in the same order whatever the tile: the bits do not depend on it, but
// for split-K, whose chunks conv.py cuts by the number of tiles.
// Layout: M, NC, K, chunk, G, H, W, source group stride, C's channel stride, C's size (the
// stride between split copies), OH, OW, sh, sw, A's group stride, A's row stride.

#define FORWARD 1
#define GRAD_INPUT 2
#define GRAD_WEIGHT 3

#define RTM (TM / WPT)
#define RTN (TN / WPT)
#define NT (RTM * RTN)
#define A_PER (TM * TK / NT)   // A-tile elements each work-item loads per k-step
#define B_PER (TK * TN / NT)

// x at tap `tap` of the window at `pix`, 0 in the padding
inline T im2col(__global const T* x, const int4 tap, const int4 pix, const int H, const int W)
{
    const int iy = pix.y + tap.y, ix = pix.z + tap.z;
    if ((uint)iy < (uint)H && (uint)ix < (uint)W)
        return x[pix.x + tap.x];
    return (T)0;
}

// grad_output at the output pixel whose tap `tap` (o, i, j) covers input pixel `pix`, else 0
inline T covering(__global const T* gy, const int4 tap, const int4 pix, const layout_t L)
{
    int ty = pix.y - tap.y, tx = pix.z - tap.z;
#if !UNIT_STRIDE
    if (ty < 0 || tx < 0 || ty % L.v[12] || tx % L.v[13])
        return (T)0;
    ty /= L.v[12];
    tx /= L.v[13];
#endif
    if ((uint)ty < (uint)L.v[10] && (uint)tx < (uint)L.v[11])
        return gy[pix.x + tap.x + ty * L.v[11] + tx];
    return (T)0;
}

__kernel __attribute__((reqd_work_group_size(RTN, RTM, 1)))
void conv_gemm(__global T* out, __global const T* a, __global const T* src,
               __global const int4* n_table, __global const int4* k_table, const layout_t L)
{
    __local T As[TK][TM + 1];
    __local T Bs[TK][TN + 1];

    const int M = L.v[0], NC = L.v[1], K = L.v[2], G = L.v[4], H = L.v[5], W = L.v[6];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTN + tn;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int g = get_group_id(2) % G, s = get_group_id(2) / G;
    const int k_begin = s * L.v[3], k_end = min(K, k_begin + L.v[3]);
    a += g * L.v[14];
    src += g * L.v[7];
    const int a_row = L.v[15];

    // the table entry each work-item's loads keep for the whole product
#if MODE == GRAD_WEIGHT
    int4 fixed[B_PER];
#pragma unroll
    for (int r = 0; r < B_PER; ++r) {
        const int n = n0 + tid / TK + r * (NT / TK);
        fixed[r] = n < NC ? n_table[n] : (int4)(0);
    }
#else
    const int b_col = n0 + tid % TN;
    const int4 fixed = b_col < NC ? n_table[b_col] : (int4)(0);
#endif

    T acc[WPT][WPT];
#pragma unroll
    for (int i = 0; i < WPT; ++i)
#pragma unroll
        for (int j = 0; j < WPT; ++j)
            acc[i][j] = 0;

    for (int k0 = k_begin; k0 < k_end; k0 += TK) {
        const int ka = k0 + tid % TK;   // the k of this work-item's A loads (and GRAD_WEIGHT's B)
#if MODE != FORWARD
        const int4 pix = ka < k_end ? k_table[ka] : (int4)(0);
#endif
#pragma unroll
        for (int r = 0; r < A_PER; ++r) {
            const int mm = tid / TK + r * (NT / TK), m = m0 + mm;
            T v = 0;
            if (m < M && ka < k_end) {
#if MODE == FORWARD
                v = a[m * a_row + ka];
#else
                v = a[m * a_row + pix.w];   // the k table holds where k's column starts
#endif
            }
            As[tid % TK][mm] = v;
        }
#pragma unroll
        for (int r = 0; r < B_PER; ++r) {
#if MODE == GRAD_WEIGHT
            const int nn = tid / TK + r * (NT / TK);
            T v = 0;
            if (n0 + nn < NC && ka < k_end)
                v = im2col(src, fixed[r], pix, H, W);
            Bs[tid % TK][nn] = v;
#else
            const int kk = tid / TN + r * (NT / TN), k = k0 + kk;
            T v = 0;
            if (b_col < NC && k < k_end) {
#if MODE == FORWARD
                v = im2col(src, k_table[k], fixed, H, W);
#else
                v = covering(src, k_table[k], fixed, L);
#endif
            }
            Bs[kk][tid % TN] = v;
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int k = 0; k < TK; ++k) {
            T av[WPT], bv[WPT];
#pragma unroll
            for (int i = 0; i < WPT; ++i)
                av[i] = As[k][tm + i * RTM];
#pragma unroll
            for (int j = 0; j < WPT; ++j)
                bv[j] = Bs[k][tn + j * RTN];
#pragma unroll
            for (int i = 0; i < WPT; ++i)
#pragma unroll
                for (int j = 0; j < WPT; ++j)
                    acc[i][j] += av[i] * bv[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    out += s * L.v[9];
    const int channel = L.v[8];
#pragma unroll
    for (int j = 0; j < WPT; ++j) {
        const int n = n0 + tn + j * RTN;
        if (n >= NC)
            continue;
#if MODE == GRAD_WEIGHT
        const int col = n;
#else
        const int col = n_table[n].w;
#endif
#pragma unroll
        for (int i = 0; i < WPT; ++i) {
            const int m = m0 + tm + i * RTM;
            if (m < M)
                out[(g * M + m) * channel + col] = acc[i][j];
        }
    }
}
