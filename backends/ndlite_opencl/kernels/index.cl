// Indexing kernels: gather (take_along_axis), its adjoint scatter_add, and put.
// scatter_add gathers per output element (no atomics): each output walks the J entries of
// its index row in order, so sums are bitwise the same every run and equal to NumPy's add.at.
// #defines: T (values), TD (put's destination), TD_BOOL, NDIM (dims, not collapsed: the axis
// must stay a dim of its own).

#define SHAPE(d) L.v[HEAD + (d)]
#define STRIDE_A(d) L.v[HEAD + NDIM + (d)]
#define STRIDE_B(d) L.v[HEAD + 2 * NDIM + (d)]

#ifdef GATHER
// v: n, x offset, index offset, x stride along axis, x size along axis | out shape,
// x strides (0 along the axis and broadcast dims), index strides (0 along broadcast dims)
#define HEAD 5
__kernel void gather(__global T* out, __global const T* x, __global const long* index,
                     const layout_t L)
{
    const IDX i = get_global_id(0);
    if (i >= L.v[0])
        return;
    IDX rest = i, ox = L.v[1], oi = L.v[2];
    for (int d = NDIM - 1; d >= 0; --d) {
        const IDX c = rest % SHAPE(d);
        rest /= SHAPE(d);
        ox += c * STRIDE_A(d);
        oi += c * STRIDE_B(d);
    }
    long j = index[oi];
    if (j < 0)
        j += L.v[4];
    out[i] = x[ox + (IDX)j * L.v[3]];
}
#endif

#ifdef SCATTER_ADD
// v: n, values offset, index offset, J, size, values stride along axis, index stride along
// axis, axis | out shape, values strides and index strides (both 0 along the axis)
#define HEAD 8
__kernel void scatter_add(__global T* out, __global const T* values, __global const long* index,
                          const layout_t L)
{
    const IDX i = get_global_id(0);
    if (i >= L.v[0])
        return;
    IDX rest = i, ov = L.v[1], oi = L.v[2], p = 0;
    for (int d = NDIM - 1; d >= 0; --d) {
        const IDX c = rest % SHAPE(d);
        rest /= SHAPE(d);
        if (d == L.v[7])
            p = c;
        ov += c * STRIDE_A(d);
        oi += c * STRIDE_B(d);
    }
    const IDX J = L.v[3], size = L.v[4], vs = L.v[5], is = L.v[6];
    T acc = 0;
    for (IDX j = 0; j < J; ++j) {
        long t = index[oi + j * is];
        if (t < 0)
            t += size;
        if (t == p)
            acc += values[ov + j * vs];
    }
    out[i] = acc;
}
#endif

#ifdef PUT
// v: n, dst offset, index offset, values offset, index stride, values stride, dst size |
// dst shape, dst strides. `select` (or NULL) lists which entries to write: with repeated
// indices the host keeps only the last write to each place, so no two items race.
#define HEAD 7
__kernel void put(__global TD* dst, __global const long* index, __global const T* values,
                  __global const long* select, const layout_t L)
{
    const IDX k = get_global_id(0);
    if (k >= L.v[0])
        return;
    const IDX s = select ? (IDX)select[k] : k;
    long f = index[L.v[2] + s * L.v[4]];
    if (f < 0)
        f += L.v[6];
    IDX rest = (IDX)f, od = L.v[1];
    for (int d = NDIM - 1; d >= 0; --d) {
        od += (rest % SHAPE(d)) * STRIDE_A(d);
        rest /= SHAPE(d);
    }
    const T v = values[L.v[3] + s * L.v[5]];
#if TD_BOOL
    dst[od] = v != 0;
#else
    dst[od] = (TD)v;
#endif
}
#endif
