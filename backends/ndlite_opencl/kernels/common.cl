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
