// col2im for a strided convolution's input gradient (conv.py): columns C[(c, i, j), (n, oy, ox)]
// (= weight^T @ grad_output, one product) summed back into grad_input (N, C, H, W). A work-item
// per input element gathers the taps (i, j), in ascending order, whose output pixel covers it:
// with stride s only about one tap in s^2 does, which the implicit GEMM would multiply by 0.
// The fallback's col2im adds the taps in the same order.
// Layout: C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, N * OH * OW, total.

__kernel void col2im(__global T* out, __global const T* cols, const layout_t L)
{
    const IDX e = get_global_id(0);
    if (e >= L.v[14])
        return;
    const IDX C = L.v[0], H = L.v[1], W = L.v[2], KH = L.v[3], KW = L.v[4];
    const IDX OH = L.v[5], OW = L.v[6], sh = L.v[7], sw = L.v[8];
    const IDX x = e % W, y = (e / W) % H, c = (e / (W * H)) % C, n = e / (W * H * C);
    const IDX row = L.v[13];  // a column row: every output pixel of every image
    __global const T* base = cols + n * OH * OW;
    T acc = 0;
    for (IDX i = 0; i < KH; ++i) {
        const IDX ty = y + L.v[9] - i * L.v[11];
        if (ty < 0 || ty % sh)
            continue;
        const IDX oy = ty / sh;
        if (oy >= OH)
            continue;
        for (IDX j = 0; j < KW; ++j) {
            const IDX tx = x + L.v[10] - j * L.v[12];
            if (tx < 0 || tx % sw)
                continue;
            const IDX ox = tx / sw;
            if (ox < OW)
                acc += base[((c * KH + i) * KW + j) * row + oy * OW + ox];
        }
    }
    out[e] = acc;
}
