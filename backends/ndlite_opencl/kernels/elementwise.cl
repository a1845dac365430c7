// The one elementwise kernel: out = EXPR(a0, a1, a2) over up to three inputs, each a buffer
// (read through its strides, which are 0 along broadcast dims) or a scalar argument.
// Every unary, binary, comparison, where, cast and assign is this kernel with other #defines:
//   NIN, T0..T2 (input types), S0..S2 (1: input i is a scalar), F0 (T0 is floating point),
//   TOUT, OUT_BOOL, EXPR (e.g. OP_ADD(a0, a1)), NDIM (0: every operand contiguous),
//   PER_ITEM (elements per work-item where NDIM is 0); P0..P2 and POUT are the buffers'
//   element types, read by LD_Pi and written by ST_POUT (common.cl: a half is stored in half
//   and computed in float, Ti and TOUT, so the result is rounded once).
// Layout: v[0] = n, v[1] = out offset, v[2 + i] = input i offset, then the NDIM-dim shape,
// then NDIM strides for out and for each input.

// ---- the ops (NumPy semantics) ---------------------------------------------------------------

#if F0
#define ISNAN0(x) ((x) != (x))  // isnan() is a library call PoCL does not vectorize
#else
#define ISNAN0(x) 0
#endif

#define OP_COPY(a) (a)
#define OP_NEG(a) (-(a))
#define OP_EXP(a) exp(a)
#define OP_LOG(a) log(a)
#define OP_SQRT(a) sqrt(a)
#define OP_TANH(a) tanh(a)
#define OP_ERF(a) erf(a)
#define OP_SIGMOID(a) sigmoid_(a)
// maximum(x, 0) as NumPy computes it: NaN propagates, relu(-0.0) = +0.0
#define OP_RELU(a) (((a) > 0 || ISNAN0(a)) ? (a) : (T0)0)
#define OP_SIGN(a) ((a) > 0 ? (T0)1 : (a) < 0 ? (T0)-1 : ISNAN0(a) ? (a) : (T0)0)
#define OP_SQUARE(a) ((a) * (a))
#define OP_RECIPROCAL(a) ((T0)1 / (a))

#define OP_ADD(a, b) ((a) + (b))
#define OP_SUB(a, b) ((a) - (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_MAXIMUM(a, b) (((a) > (b) || ISNAN0(a)) ? (a) : (b))
#define OP_MINIMUM(a, b) (((a) < (b) || ISNAN0(a)) ? (a) : (b))
#define OP_EQ(a, b) ((a) == (b))
#define OP_NE(a, b) ((a) != (b))
#define OP_LT(a, b) ((a) < (b))
#define OP_LE(a, b) ((a) <= (b))
#define OP_GT(a, b) ((a) > (b))
#define OP_GE(a, b) ((a) >= (b))
#define OP_WHERE(c, a, b) ((c) ? (a) : (b))
// ReLU's backward from its output: where(out > 0, grad, 0) (step_fallbacks.py)
#define OP_RELU_GRAD(g, o) ((o) > 0 ? (g) : (T0)0)

#if F0
#define OP_ABS(a) fabs(a)
#define OP_DIV(a, b) ((a) / (b))
#define OP_POW(a, b) pow(a, b)

// exp(-|x|) never overflows, and each branch is exact in relative terms
inline T0 sigmoid_(T0 x)
{
    T0 e = exp(-fabs(x));
    return x >= 0 ? (T0)1 / ((T0)1 + e) : e / ((T0)1 + e);
}

// GELU and its backward in one pass each, the formulas of transformer_fallbacks.py (exact:
// erf; "tanh": x sigmoid(2 z), z = sqrt(2 / pi) (x + 0.044715 x^3))
inline T0 gelu_z2_(T0 x) { return (x + x * x * x * (T0)0.044715) * (T0)1.5957691216057308; }
#define OP_GELU(a) ((a) * ((erf((a) * (T0)0.7071067811865476) + (T0)1) * (T0)0.5))
#define OP_GELU_TANH(a) ((a) * sigmoid_(gelu_z2_(a)))
inline T0 gelu_grad_(T0 g, T0 x)
{
    const T0 cdf = (erf(x * (T0)0.7071067811865476) + (T0)1) * (T0)0.5;
    return g * (cdf + x * (exp(x * x * (T0)-0.5) * (T0)0.3989422804014327));
}
inline T0 gelu_tanh_grad_(T0 g, T0 x)
{
    const T0 z2 = gelu_z2_(x), s = sigmoid_(z2), s_neg = sigmoid_(-z2);
    return g * (s + x * s * s_neg * (((T0)1 + x * x * (T0)(3 * 0.044715)) * (T0)1.5957691216057308));
}
#define OP_GELU_GRAD(g, x) gelu_grad_(g, x)
#define OP_GELU_TANH_GRAD(g, x) gelu_tanh_grad_(g, x)
#else
// OpenCL's abs returns the unsigned type; the cast back wraps INT_MIN as NumPy does
#define OP_ABS(a) ((T0)abs(a))
#define OP_DIV(a, b) floor_div_(a, b)
#define OP_POW(a, b) int_pow_(a, b)

// NumPy's floor_divide for integers: rounds toward -inf, and x // 0 is 0
inline T0 floor_div_(T0 a, T0 b)
{
    if (b == 0)
        return 0;
    T0 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

inline T0 int_pow_(T0 base, T0 e)
{
    T0 r = 1;
    if (e < 0)  // the truncated real result, as PyTorch (and the CUDA backend): 1, +-1 or 0
        return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
    while (e > 0) {
        if (e & 1)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
#endif

// ---- the kernel ------------------------------------------------------------------------------

#if S0
#define PARAM0 , const T0 s0
#define LOAD0(o) s0
#else
#define PARAM0 , __global const P0* p0
#define LOAD0(o) LD_P0(p0, o)
#endif

#if NIN > 1 && S1
#define PARAM1 , const T1 s1
#define LOAD1(o) s1
#elif NIN > 1
#define PARAM1 , __global const P1* p1
#define LOAD1(o) LD_P1(p1, o)
#else
#define PARAM1
#endif

#if NIN > 2 && S2
#define PARAM2 , const T2 s2
#define LOAD2(o) s2
#elif NIN > 2
#define PARAM2 , __global const P2* p2
#define LOAD2(o) LD_P2(p2, o)
#else
#define PARAM2
#endif

#define SHAPE(d) L.v[2 + NIN + (d)]
#define STRIDE(k, d) L.v[2 + NIN + NDIM * (1 + (k)) + (d)]

#if NDIM == 0 && PER_ITEM > 1
// Large contiguous operands on a GPU: each item loads PER_ITEM elements a grid apart (each
// load coalesced across the items) before computing any, so more bytes are in flight per item
// than one element's: what a read-one-write-one op needs to approach the copy bandwidth.
__kernel void map(__global POUT* out, const layout_t L PARAM0 PARAM1 PARAM2)
{
    const IDX n = L.v[0], step = get_global_size(0);
    const IDX i = get_global_id(0);
    T0 x0[PER_ITEM];
#if NIN > 1
    T1 x1[PER_ITEM];
#endif
#if NIN > 2
    T2 x2[PER_ITEM];
#endif
#pragma unroll
    for (int r = 0; r < PER_ITEM; ++r) {
        const IDX k = i + r * step;
        if (k < n) {
            x0[r] = LOAD0(L.v[2] + k);
#if NIN > 1
            x1[r] = LOAD1(L.v[3] + k);
#endif
#if NIN > 2
            x2[r] = LOAD2(L.v[4] + k);
#endif
        }
    }
#pragma unroll
    for (int r = 0; r < PER_ITEM; ++r) {
        const IDX k = i + r * step;
        if (k < n) {
            const T0 a0 = x0[r];
#if NIN > 1
            const T1 a1 = x1[r];
#endif
#if NIN > 2
            const T2 a2 = x2[r];
#endif
#if OUT_BOOL
            out[L.v[1] + k] = (EXPR) != 0;
#else
            ST_POUT(out, L.v[1] + k, (TOUT)(EXPR));
#endif
        }
    }
}
#else
__kernel void map(__global POUT* out, const layout_t L PARAM0 PARAM1 PARAM2)
{
    const IDX i = get_global_id(0);
    if (i >= L.v[0])
        return;
    IDX o = L.v[1];
    IDX o0 = L.v[2];
#if NIN > 1
    IDX o1 = L.v[3];
#endif
#if NIN > 2
    IDX o2 = L.v[4];
#endif
#if NDIM == 0
    o += i;
    o0 += i;
#if NIN > 1
    o1 += i;
#endif
#if NIN > 2
    o2 += i;
#endif
#else
    IDX rest = i;
    for (int d = NDIM - 1; d >= 0; --d) {
        const IDX n = SHAPE(d);
        const IDX c = rest % n;
        rest /= n;
        o += c * STRIDE(0, d);
        o0 += c * STRIDE(1, d);
#if NIN > 1
        o1 += c * STRIDE(2, d);
#endif
#if NIN > 2
        o2 += c * STRIDE(3, d);
#endif
    }
#endif
    const T0 a0 = LOAD0(o0);
#if NIN > 1
    const T1 a1 = LOAD1(o1);
#endif
#if NIN > 2
    const T2 a2 = LOAD2(o2);
#endif
#if OUT_BOOL
    out[o] = (EXPR) != 0;
#else
    ST_POUT(out, o, (TOUT)(EXPR));
#endif
}
#endif
