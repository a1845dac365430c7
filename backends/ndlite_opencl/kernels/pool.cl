// 2-D max and average pooling of NCHW planes, forward and backward, one work-item per element.
// The backward kernels gather per input element over just the windows that cover it, in
// row-major window order (the order of the fallback's scatter_add): no atomics, fixed sums.
// #defines: T. Layout: count, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, count_include_pad.
// Windows start at (oy * sh - ph, ox * sw - pw); the padding never wins a max and adds nothing.

#define H L.v[1]
#define W L.v[2]
#define OH L.v[3]
#define OW L.v[4]
#define KH L.v[5]
#define KW L.v[6]
#define SH L.v[7]
#define SW L.v[8]
#define PH L.v[9]
#define PW L.v[10]
#define DH L.v[11]
#define DW L.v[12]

// the first maximum of each window (row-major; the last NaN if there is one) and its
// position y * W + x in the plane
__kernel void max_pool(__global T* out, __global long* indices, __global const T* x,
                       const layout_t L)
{
    const int i = get_global_id(0);
    if (i >= L.v[0])
        return;
    const int ox = i % OW, rest = i / OW, oy = rest % OH, plane = rest / OH;
    x += plane * H * W;
    const int y0 = oy * SH - PH, x0 = ox * SW - PW;
    T best = 0;
    int where = -1;
    for (int a = 0; a < KH; ++a) {
        const int y = y0 + a * DH;
        if ((uint)y >= (uint)H)
            continue;
        for (int c = 0; c < KW; ++c) {
            const int xx = x0 + c * DW;
            if ((uint)xx >= (uint)W)
                continue;
            const T v = x[y * W + xx];
            // strict: a tie keeps the earlier element; a NaN always wins (the last one, as
            // PyTorch's index says), so the window's value is NaN
            if (where < 0 || v > best || v != v) {
                best = v;
                where = y * W + xx;
            }
        }
    }
    out[i] = best;
    indices[i] = where;
}

// per input element: the sum of grad_output over the windows whose maximum it was
__kernel void max_pool_grad(__global T* grad_input, __global const T* grad_output,
                            __global const long* indices, const layout_t L)
{
    const int i = get_global_id(0);
    if (i >= L.v[0])
        return;
    const int xx = i % W, rest = i / W, y = rest % H, plane = rest / H;
    const int base = plane * OH * OW;
    const long here = y * W + xx;
    T acc = 0;
    // a descending walks the covering windows' rows ascending (likewise c and columns)
    for (int a = KH - 1; a >= 0; --a) {
        const int ty = y + PH - a * DH;
        if (ty < 0 || ty % SH)
            continue;
        const int oy = ty / SH;
        if (oy >= OH)
            continue;
        for (int c = KW - 1; c >= 0; --c) {
            const int tx = xx + PW - c * DW;
            if (tx < 0 || tx % SW)
                continue;
            const int ox = tx / SW;
            if (ox >= OW)
                continue;
            const int o = base + oy * OW + ox;
            if (indices[o] == here)
                acc += grad_output[o];
        }
    }
    grad_input[i] = acc;
}

// what window (oy, ox)'s sum is divided by (PyTorch's rule, as fallbacks.avg_pool2d_divisor)
inline int divisor(const layout_t L, const int oy, const int ox)
{
    const int hs = oy * SH - PH, ws = ox * SW - PW;
    const int he = min(hs + KH, H + PH), we = min(ws + KW, W + PW);
    if (L.v[13])
        return (he - hs) * (we - ws);
    return (min(he, H) - max(hs, 0)) * (min(we, W) - max(ws, 0));
}

__kernel void avg_pool(__global T* out, __global const T* x, const layout_t L)
{
    const int i = get_global_id(0);
    if (i >= L.v[0])
        return;
    const int ox = i % OW, rest = i / OW, oy = rest % OH, plane = rest / OH;
    x += plane * H * W;
    const int y0 = oy * SH - PH, x0 = ox * SW - PW;
    T acc = 0;
    for (int a = 0; a < KH; ++a) {
        const int y = y0 + a;
        if ((uint)y >= (uint)H)
            continue;
        for (int c = 0; c < KW; ++c) {
            const int xx = x0 + c;
            if ((uint)xx < (uint)W)
                acc += x[y * W + xx];
        }
    }
    out[i] = acc / (T)divisor(L, oy, ox);
}

__kernel void avg_pool_grad(__global T* grad_input, __global const T* grad_output,
                            const layout_t L)
{
    const int i = get_global_id(0);
    if (i >= L.v[0])
        return;
    const int xx = i % W, rest = i / W, y = rest % H, plane = rest / H;
    grad_output += plane * OH * OW;
    T acc = 0;
    for (int a = KH - 1; a >= 0; --a) {
        const int ty = y + PH - a;
        if (ty < 0 || ty % SH)
            continue;
        const int oy = ty / SH;
        if (oy >= OH)
            continue;
        for (int c = KW - 1; c >= 0; --c) {
            const int tx = xx + PW - c;
            if (tx < 0 || tx % SW)
                continue;
            const int ox = tx / SW;
            if (ox < OW)
                acc += grad_output[oy * OW + ox] / (T)divisor(L, oy, ox);
        }
    }
    grad_input[i] = acc;
}
