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
// kernels.slot() points at one of these. Halves are stored in half and computed in float
// (float16 by vload_half/vstore_half_rte, which need no cl_khr_fp16; bfloat16 as the high 16
// bits of a float32, rounded to nearest even), so a value is rounded once, when stored.
#define LOAD_PLAIN(p, o) ((p)[o])
#define STORE_PLAIN(p, o, v) ((p)[o] = (v))
#define LOAD_F16(p, o) vload_half((o), (p))
// (a NaN as NumPy's cast makes it: the sign and the top payload bits, quiet; vstore_half's NaN
// bits vary by implementation)
#define STORE_F16(p, o, v) do { if ((v) != (v)) ((__global ushort*)(p))[o] = f16_nan(v); \
                                else vstore_half_rte((v), (o), (p)); } while (0)
#define LOAD_BF16(p, o) as_float((uint)(p)[o] << 16)
#define STORE_BF16(p, o, v) ((p)[o] = bf16_round(v))

inline ushort __attribute__((overloadable)) f16_nan(float x)
{
    const uint u = as_uint(x);
    return (ushort)(((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF));
}

inline ushort __attribute__((overloadable)) bf16_round(float x)
{
    const uint u = as_uint(x);
    if (x != x)
        return (ushort)((u >> 16) | 0x40);  // a NaN stays a NaN, quiet
    return (ushort)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
// (a double becomes a bfloat16 through float32, rounded twice, as ml_dtypes and PyTorch cast
// it; a float16 is rounded from the double once, as NumPy's cast)

#ifdef cl_khr_fp64
inline ushort __attribute__((overloadable)) f16_nan(double x)
{
    const ulong u = as_ulong(x);
    return (ushort)(((u >> 48) & 0x8000) | 0x7E00 | ((u >> 42) & 0x3FF));
}

#endif
