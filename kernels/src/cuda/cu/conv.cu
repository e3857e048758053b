// im2col / col2im for convolution, and max pooling, in f32 (the runtime lowers
// other float dtypes to f32 for convolution, as on the CPU). The adjoints
// (col2im, max pooling's backward) are written as gathers, so they need no
// atomics and are deterministic.
// CPU twins: kernels/src/cpu/conv.rs and pool.rs.

// Mirrors `ConvGeom` in kernels/src/cuda/launch.rs.
struct ConvGeom {
    int n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// x: contiguous [n, c, h, w]; cols: [n, c*kh*kw, oh*ow]; taps in the padding read `pad`.
extern "C" __global__ void im2col_f32(size_t total, ConvGeom g, float pad, const float *x, float *cols) {
    GRID_STRIDE(i, total) {
        size_t l = (size_t)g.oh * g.ow;
        size_t p = i % l, r = i / l;          // r = (nc * kh + ki) * kw + kj
        int kj = (int)(r % g.kw), ki = (int)((r / g.kw) % g.kh);
        size_t nc = r / ((size_t)g.kw * g.kh);
        int oi = (int)(p / g.ow), oj = (int)(p % g.ow);
        int ih = oi * g.sh + ki * g.dh - g.ph, iw = oj * g.sw + kj * g.dw - g.pw;
        cols[i] = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
            ? x[(nc * g.h + ih) * g.w + iw] : pad;
    }
}

// The adjoint: each input pixel sums the column entries that read it.
extern "C" __global__ void col2im_f32(size_t total, ConvGeom g, const float *cols, float *x) {
    GRID_STRIDE(i, total) {
        int iw = (int)(i % g.w), ih = (int)((i / g.w) % g.h);
        size_t nc = i / ((size_t)g.w * g.h);
        size_t l = (size_t)g.oh * g.ow;
        float acc = 0.0f;
        for (int ki = 0; ki < g.kh; ++ki) {
            int ti = ih + g.ph - ki * g.dh;
            if (ti < 0 || ti % g.sh) continue;
            int oi = ti / g.sh;
            if (oi >= g.oh) continue;
            for (int kj = 0; kj < g.kw; ++kj) {
                int tj = iw + g.pw - kj * g.dw;
                if (tj < 0 || tj % g.sw) continue;
                int oj = tj / g.sw;
                if (oj >= g.ow) continue;
                acc += cols[((nc * g.kh + ki) * g.kw + kj) * l + (size_t)oi * g.ow + oj];
            }
        }
        x[i] = acc;
    }
}

// Max pooling straight from the image, one thread per output: the maximum
// and its flat index ih * w + iw in the plane. A NaN wins (the last one) and
// ties keep the first tap, as the CPU twin (kernels/src/cpu/pool.rs).
extern "C" __global__ void max_pool2d_f32(size_t total, ConvGeom g, const float *x, float *vals, long long *idx) {
    GRID_STRIDE(i, total) {
        int oj = (int)(i % g.ow), oi = (int)((i / g.ow) % g.oh);
        size_t nc = i / ((size_t)g.ow * g.oh);
        const float *src = x + nc * g.h * g.w;
        float best = -TAPIR_INF;
        long long at = -1;
        for (int ki = 0; ki < g.kh; ++ki) {
            int ih = oi * g.sh - g.ph + ki * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            for (int kj = 0; kj < g.kw; ++kj) {
                int iw = oj * g.sw - g.pw + kj * g.dw;
                if (iw < 0 || iw >= g.w) continue;
                long long pos = (long long)ih * g.w + iw;
                float v = src[pos];
                if (at < 0) at = pos;
                if (v > best || isnan(v)) { best = v; at = pos; }
            }
        }
        vals[i] = best;
        idx[i] = at;
    }
}

// Its gradient as a gather (deterministic, no atomics): each input pixel sums
// the gradients of the windows that could hold it and chose it.
extern "C" __global__ void max_pool2d_backward_f32(size_t total, ConvGeom g, const float *grad, const long long *idx, float *gx) {
    GRID_STRIDE(i, total) {
        int iw = (int)(i % g.w), ih = (int)((i / g.w) % g.h);
        size_t nc = i / ((size_t)g.w * g.h);
        size_t base = nc * g.oh * g.ow;
        long long me = (long long)ih * g.w + iw;
        float acc = 0.0f;
        for (int ki = 0; ki < g.kh; ++ki) {
            int ti = ih + g.ph - ki * g.dh;
            if (ti < 0 || ti % g.sh) continue;
            int oi = ti / g.sh;
            if (oi >= g.oh) continue;
            for (int kj = 0; kj < g.kw; ++kj) {
                int tj = iw + g.pw - kj * g.dw;
                if (tj < 0 || tj % g.sw) continue;
                int oj = tj / g.sw;
                if (oj >= g.ow) continue;
                size_t o = base + (size_t)oi * g.ow + oj;
                if (idx[o] == me) acc += grad[o];
            }
        }
        gx[i] = acc;
    }
}
