// Max and average pooling, forward and backward, for the CuPy backend (nn.py), NCHW.
//
// Forwards: one thread per output element, taps in row-major (kernel row, kernel column)
// order, as the reference (fallbacks.py) compares and adds its strided views; average
// pooling adds 0 for padding taps as it does, so values, indices and sums match it bitwise.
// Backwards gather: one thread per input element reads the windows covering it, in a fixed
// order -- no atomics, deterministic run to run.
//
// `plane` is n * C + c; I is the index type (int or long long, see conv.cu).

// values[e] = max over the window, indices[e] = h * W + w of its first maximum (a later tap
// wins only when strictly greater, so NaN wins only as the first tap, like the reference).
// Padding taps are skipped: the padding "is -inf and never wins" (protocol.py), also in a
// window whose input values are all -inf, which then points at its first input element as
// in PyTorch (pooling refuses windows that hold only padding).
template <typename T, typename I>
__host__ __device__ inline void ndl_max_pool_at(const T* x, T* values, long long* indices, I e,
                                                I H, I W, I OH, I OW, I kh, I kw, I sh, I sw,
                                                I ph, I pw, I dh, I dw) {
  const I ox = e % OW;
  const I oy = (e / OW) % OH;
  const I plane = e / (OW * OH);
  const T* xp = x + plane * H * W;
  T best = T(0);
  long long where = 0;
  bool first = true;
  for (I i = 0; i < kh; ++i) {
    const I y = oy * sh - ph + i * dh;
    for (I j = 0; j < kw; ++j) {
      const I xx = ox * sw - pw + j * dw;
      if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
      const T v = xp[y * W + xx];
      if (first || v > best || v != v) {  // a NaN wins: the last one (PyTorch's index)
        best = v;
        where = static_cast<long long>(y) * W + xx;
        first = false;
      }
    }
  }
  values[e] = best;
  indices[e] = where;
}

template <typename T, typename I>
__global__ void ndl_max_pool(const T* x, T* values, long long* indices, I total, I H, I W,
                             I OH, I OW, I kh, I kw, I sh, I sw, I ph, I pw, I dh, I dw) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_max_pool_at<T, I>(x, values, indices, e, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw);
  }
}

// The windows along one dim whose span [o * s - p, o * s - p + (k - 1) * d] covers position
// `y`: first and last output index (last < first when none does).
template <typename I>
__host__ __device__ inline void ndl_covering(I y, I k, I s, I p, I d, I out, I* first, I* last) {
  const I top = y + p - (k - 1) * d;  // o * s >= top
  *first = top <= 0 ? I(0) : (top + s - 1) / s;
  const I bottom = (y + p) / s;  // o * s <= y + p
  *last = bottom < out - 1 ? bottom : out - 1;
}

// grad_x[e] = sum of grad_output over the windows whose index points at e, in ascending
// window order (the order in which the reference's scatter_add adds them, from 0).
template <typename T, typename I>
__host__ __device__ inline void ndl_max_pool_grad_at(const T* grad_output,
                                                     const long long* indices, T* grad_x, I e,
                                                     I H, I W, I OH, I OW, I kh, I kw, I sh,
                                                     I sw, I ph, I pw, I dh, I dw) {
  const I xx = e % W;
  const I y = (e / W) % H;
  const I plane = e / (W * H);
  I oy0, oy1, ox0, ox1;
  ndl_covering<I>(y, kh, sh, ph, dh, OH, &oy0, &oy1);
  ndl_covering<I>(xx, kw, sw, pw, dw, OW, &ox0, &ox1);
  const long long target = static_cast<long long>(y) * W + xx;
  const I base = plane * OH * OW;
  T acc = T(0);
  for (I oy = oy0; oy <= oy1; ++oy) {
    for (I ox = ox0; ox <= ox1; ++ox) {
      const I o = base + oy * OW + ox;
      if (indices[o] == target) acc += grad_output[o];
    }
  }
  grad_x[e] = acc;
}

template <typename T, typename I>
__global__ void ndl_max_pool_grad(const T* grad_output, const long long* indices, T* grad_x,
                                  I total, I H, I W, I OH, I OW, I kh, I kw, I sh, I sw, I ph,
                                  I pw, I dh, I dw) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_max_pool_grad_at<T, I>(grad_output, indices, grad_x, e, H, W, OH, OW, kh, kw, sh, sw,
                               ph, pw, dh, dw);
  }
}

// What window (oy, ox) divides its sum by: PyTorch's rule (fallbacks.avg_pool2d_divisor).
template <typename I>
__host__ __device__ inline I ndl_avg_divisor(I oy, I ox, I H, I W, I kh, I kw, I sh, I sw, I ph,
                                             I pw, bool count_include_pad) {
  const I y0 = oy * sh - ph, x0 = ox * sw - pw;
  const I y1 = y0 + kh < H + ph ? y0 + kh : H + ph;
  const I x1 = x0 + kw < W + pw ? x0 + kw : W + pw;
  if (count_include_pad) return (y1 - y0) * (x1 - x0);
  const I rows = (y1 < H ? y1 : H) - (y0 > 0 ? y0 : I(0));
  const I cols = (x1 < W ? x1 : W) - (x0 > 0 ? x0 : I(0));
  return rows * cols;
}

// out[e] = (first tap + second tap + ...) / divisor, padding taps adding 0 as in the reference.
template <typename T, typename I>
__host__ __device__ inline void ndl_avg_pool_at(const T* x, T* out, I e, I H, I W, I OH, I OW,
                                                I kh, I kw, I sh, I sw, I ph, I pw,
                                                bool count_include_pad) {
  const I ox = e % OW;
  const I oy = (e / OW) % OH;
  const I plane = e / (OW * OH);
  const T* xp = x + plane * H * W;
  T acc = T(0);
  for (I i = 0; i < kh; ++i) {
    const I y = oy * sh - ph + i;
    for (I j = 0; j < kw; ++j) {
      const I xx = ox * sw - pw + j;
      const T v = (y >= 0 && y < H && xx >= 0 && xx < W) ? xp[y * W + xx] : T(0);
      acc = (i == 0 && j == 0) ? v : acc + v;
    }
  }
  out[e] = acc / static_cast<T>(
      ndl_avg_divisor<I>(oy, ox, H, W, kh, kw, sh, sw, ph, pw, count_include_pad));
}

template <typename T, typename I>
__global__ void ndl_avg_pool(const T* x, T* out, I total, I H, I W, I OH, I OW, I kh, I kw,
                             I sh, I sw, I ph, I pw, bool count_include_pad) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_avg_pool_at<T, I>(x, out, e, H, W, OH, OW, kh, kw, sh, sw, ph, pw, count_include_pad);
  }
}

// grad_x[e] = sum over kernel offsets (i, j), in row-major order, of grad_output / divisor of
// the one window whose tap (i, j) lands on e (the reference adds offset by offset, from 0).
template <typename T, typename I>
__host__ __device__ inline void ndl_avg_pool_grad_at(const T* grad_output, T* grad_x, I e, I H,
                                                     I W, I OH, I OW, I kh, I kw, I sh, I sw,
                                                     I ph, I pw, bool count_include_pad) {
  const I xx = e % W;
  const I y = (e / W) % H;
  const I plane = e / (W * H);
  const T* g = grad_output + plane * OH * OW;
  T acc = T(0);
  for (I i = 0; i < kh; ++i) {
    const I ty = y + ph - i;
    if (ty < 0) break;
    if (ty % sh != 0) continue;
    const I oy = ty / sh;
    if (oy >= OH) continue;
    for (I j = 0; j < kw; ++j) {
      const I tx = xx + pw - j;
      if (tx < 0) break;
      if (tx % sw != 0) continue;
      const I ox = tx / sw;
      if (ox >= OW) continue;
      acc += g[oy * OW + ox] / static_cast<T>(ndl_avg_divisor<I>(
                                   oy, ox, H, W, kh, kw, sh, sw, ph, pw, count_include_pad));
    }
  }
  grad_x[e] = acc;
}

template <typename T, typename I>
__global__ void ndl_avg_pool_grad(const T* grad_output, T* grad_x, I total, I H, I W, I OH,
                                  I OW, I kh, I kw, I sh, I sw, I ph, I pw,
                                  bool count_include_pad) {
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    ndl_avg_pool_grad_at<T, I>(grad_output, grad_x, e, H, W, OH, OW, kh, kw, sh, sw, ph, pw,
                               count_include_pad);
  }
}
