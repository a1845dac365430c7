// im2col and col2im for the CuPy backend's convolution (nn.py), NCHW.
//
// Columns are "batch innermost": cols[row, col] with row = (c * kh + i) * kw + j (input
// channel, kernel row, kernel column) and col = (n * OH + oy) * OW + ox, so that a whole
// layer is one matrix product per group: weight (O, C*kh*kw) @ cols (C*kh*kw, N*OH*OW).
// Rows of one group are contiguous (channels g*Cg .. (g+1)*Cg - 1).
//
// col2im is a gather: one thread per input element sums the columns that read it, in
// ascending (i, j) order -- no atomics, bitwise deterministic, and the same order as the
// reference's col2im (fallbacks.py), which adds kernel offsets in row-major order.
//
// I is the index type: int when every index fits in 31 bits (cheaper division), else long
// long. Each kernel is a grid-stride loop over a per-element function that host code can
// call too (a test harness runs them on the CPU against the NumPy reference).

template <typename T, typename I>
__host__ __device__ inline void ndl_im2col_at(const T* x, T* cols, I e, I N, I C, I H, I W,
                                              I OH, I OW, I kh, I kw, I sh, I sw, I ph, I pw,
                                              I dh, I dw) {
  const I np = N * OH * OW;
  const I col = e % np;
  const I row = e / np;
  const I ox = col % OW;
  const I oy = (col / OW) % OH;
  const I n = col / (OW * OH);
  const I j = row % kw;
  const I i = (row / kw) % kh;
  const I c = row / (kw * kh);
  const I y = oy * sh - ph + i * dh;
  const I xx = ox * sw - pw + j * dw;
  cols[e] = (y >= 0 && y < H && xx >= 0 && xx < W) ? x[((n * C + c) * H + y) * W + xx] : T(0);
}

template <typename T, typename I>
__global__ void ndl_im2col(const T* x, T* cols, I total, I N, I C, I H, I W, I OH, I OW, I kh,
                           I kw, I sh, I sw, I ph, I pw, I dh, I dw) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_im2col_at<T, I>(x, cols, e, N, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw);
  }
}

// grad_x[n, c, y, x] = sum over kernel offsets (i, j) whose window position (oy, ox) lands on
// (y, x): y + ph - i * dh == oy * sh with 0 <= oy < OH, and the same along x.
template <typename T, typename I>
__host__ __device__ inline void ndl_col2im_at(const T* cols, T* grad_x, I e, I N, I C, I H, I W,
                                              I OH, I OW, I kh, I kw, I sh, I sw, I ph, I pw,
                                              I dh, I dw) {
  const I xx = e % W;
  const I y = (e / W) % H;
  const I c = (e / (W * H)) % C;
  const I n = e / (W * H * C);
  const I np = N * OH * OW;
  T acc = T(0);
  for (I i = 0; i < kh; ++i) {
    const I ty = y + ph - i * dh;
    if (ty < 0) break;  // ty only decreases with i
    if (ty % sh != 0) continue;
    const I oy = ty / sh;
    if (oy >= OH) continue;
    for (I j = 0; j < kw; ++j) {
      const I tx = xx + pw - j * dw;
      if (tx < 0) break;
      if (tx % sw != 0) continue;
      const I ox = tx / sw;
      if (ox >= OW) continue;
      acc += cols[((c * kh + i) * kw + j) * np + (n * OH + oy) * OW + ox];
    }
  }
  grad_x[e] = acc;
}

template <typename T, typename I>
__global__ void ndl_col2im(const T* cols, T* grad_x, I total, I N, I C, I H, I W, I OH, I OW,
                           I kh, I kw, I sh, I sw, I ph, I pw, I dh, I dw) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_col2im_at<T, I>(cols, grad_x, e, N, C, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw);
  }
}

// (A, B, P) -> (B, A, P): the layer's output (O, N, P) to NCHW (N, O, P), and grad_output
// back to (O, N, P). One thread per output element; P is the contiguous inner run.
template <typename T, typename I>
__host__ __device__ inline void ndl_swap01_at(const T* src, T* dst, I e, I A, I B, I P) {
  const I p = e % P;
  const I a = (e / P) % A;
  const I b = e / (P * A);
  dst[e] = src[(a * B + b) * P + p];
}

template <typename T, typename I>
__global__ void ndl_swap01(const T* src, T* dst, I total, I A, I B, I P) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_swap01_at<T, I>(src, dst, e, A, B, P);
  }
}

// y[n, c, p] += bias[c] in place over a fresh (N, C, P) output: a convolution's bias, as the
// fallback's add (one rounding), then with `relu` NumPy's maximum(y, 0) as ndl_relu
// (elementwise.cu): NaN stays NaN, -0.0 becomes +0.0. One thread per element.
template <typename T, typename I>
__global__ void ndl_channel_bias(T* y, const T* bias, I total, I C, I P, int relu) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const T v = y[e] + bias[(e / P) % C];
    y[e] = (!relu || v > T(0) || v != v) ? v : T(0);
  }
}
