// Prepended to every ndlite program, after the #defines the Python side chose.
//
// IDX is the index type (int where every offset fits in 31 bits, else long): 32-bit division,
// which strided kernels do per dim, is several times cheaper on GPUs than 64-bit.
// A layout (shape, strides, offsets) travels as one struct passed by value: one kernel argument
// instead of one per dim, and no buffer to upload per call.

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

typedef struct { IDX v[LAYOUT_LEN]; } layout_t;

// Storage: a kernel reads and writes a buffer through LD_x(p, o) / ST_x(p, o, v), which
// kernels.slot() points at one of these. Halves are stored in half and computed in float, so a
// value is rounded once, when stored (to nearest even). Both halves are converted with integer
// bit operations, not vload_half/vstore_half_rte (which need no cl_khr_fp16 either, but PoCL's
// vstore_half_rte runs at a third of the memory's speed): float16 as NumPy converts it (a NaN
// keeps its sign and top payload bits, quiet), bfloat16 as the high 16 bits of a float32.
#define LOAD_PLAIN(p, o) ((p)[o])
#define STORE_PLAIN(p, o, v) ((p)[o] = (v))
#define LOAD_F16(p, o) f16_to_float(((__global const ushort*)(p))[o])
#define STORE_F16(p, o, v) (((__global ushort*)(p))[o] = f16_round(v))
#define LOAD_BF16(p, o) as_float((uint)(p)[o] << 16)
#define STORE_BF16(p, o, v) ((p)[o] = bf16_round(v))

inline float f16_to_float(const ushort h)
{
    const uint magnitude = (uint)(h & 0x7FFF) << 13, exponent = magnitude & 0x0F800000;
    uint u = magnitude + 0x38000000;  // the exponent rebiased from 15 to 127
    if (exponent == 0x0F800000)
        u += 0x38000000;  // inf or NaN: the exponent all ones
    else if (exponent == 0)  // zero or subnormal: exact through a float subtraction
        u = as_uint(as_float(u + 0x00800000) - as_float(0x38800000));
    return as_float(u | (uint)(h & 0x8000) << 16);
}

inline ushort __attribute__((overloadable)) f16_round(const float x)
{
    uint u = as_uint(x);
    const uint sign = (u >> 16) & 0x8000;
    u &= 0x7FFFFFFF;
    uint h;
    if (u >= 0x47800000)  // 65536 and up, inf, NaN
        h = u > 0x7F800000 ? 0x7E00 | ((u >> 13) & 0x3FF) : 0x7C00;
    else if (u < 0x38800000)  // below 2^-14: a subnormal half, rounded by a float addition
        h = as_uint(as_float(u) + 0.5f) - 0x3F000000;
    else
        h = (u - 0x38000000 + 0xFFF + ((u >> 13) & 1)) >> 13;
    return (ushort)(h | sign);
}

inline ushort __attribute__((overloadable)) bf16_round(const float x)
{
    const uint u = as_uint(x);
    if (x != x)
        return (ushort)((u >> 16) | 0x40);  // a NaN stays a NaN, quiet
    return (ushort)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
// (a double becomes a bfloat16 through float32, rounded twice, as ml_dtypes and PyTorch cast
// it; a float16 is rounded from the double once, as NumPy's cast)

#ifdef cl_khr_fp64
inline ushort __attribute__((overloadable)) f16_round(const double x)
{
    // to float toward zero, the last bit set where that was inexact (round to odd: then the
    // rounding to float16 is the one rounding of the double)
    float f = convert_float_rtz(x);
    if ((double)f != x && x == x)
        f = as_float(as_uint(f) | 1);
    return f16_round(f);
}
#endif

#ifdef GROUP_SUM
// The sum of one value per work-item of a work-group of WG (a power of two), as a fixed tree
// in local memory (`scratch`, WG values of the arithmetic type T): the same order, so the same
// bits, every run. For the kernels that define GROUP_SUM (norm.cl, transformer.cl).
inline T group_sum(T v, __local T* scratch)
{
    const int t = get_local_id(0);
    scratch[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
        if (t < w)
            scratch[t] = scratch[t] + scratch[t + w];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const T total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}
#endif
