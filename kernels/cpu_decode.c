/* Grouped decode attention on the CPU, in the FlashAttention cache layout (kernels/cpu_decode.py
   builds and calls it; kernels/reference.py is the definition it is tested against). It serves GQA
   (K heads of keys and values, head dim d) and absorbed MLA (one shared latent "head" whose rows are
   keys of DK = kv_lora_rank + rope elements and, in their first DV = kv_lora_rank elements, values).

   Why C and not PyTorch ops: in the layout (…, token, K heads, d) one cached token is one
   contiguous row of all K heads. Any head-by-head pass (PyTorch's CPU attention kernels, SDPA,
   batched matmuls over strided views) reads 512-byte pieces 4 KB apart, which the hardware
   prefetchers stream badly; and those kernels are not built for G query rows. Here a work item is
   one slice of one sequence's tokens; it reads each K row and each V row once, front to back, and
   serves all K heads and all G query heads of each from that one read, with register tiles so the
   arithmetic keeps up with memory. With MLA, G = H (16 to 128) query rows share each latent row, so
   decode does about 2H FLOPs per cached element and is compute-bound: the tiles (up to 8 query rows
   × 2 tokens for q·k, 8 rows × 32 values for p·v) exist to keep the FMA units fed from L1.

   Math, per query head h (KV head h / G), over the tokens of one slice in blocks of T:
       s_t   = scale · q_h · k_t                     (DK-wide)   scores of the block
       m'    = max(m, max_t s_t),   α = exp(m − m')             running max and rescale factor
       l     = α·l + Σ_t exp(s_t − m')
       acc   = α·acc + Σ_t exp(s_t − m') · v_t       (DV-wide; MLA: v_t = k_t[0 : DV])
   and at the end of the slice o = acc / l, lse = m + log l. The slices of one sequence are merged
   by their lse in Python (kernels/torch_decode.merge), as Flash-Decoding does on a GPU.

   Built with -ffast-math (vectorised expf from libmvec), so no infinity ever enters the
   arithmetic: the running max starts at NEG, and an empty slice reports lse = NEG, which the
   caller turns into −inf. All arithmetic is float32; fp16/bf16 inputs are widened on load. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { F32 = 0, F16 = 1, BF16 = 2 };
#define T 32          /* tokens per block: scores of a block stay in L1 */
#define W 16          /* floats per vector; T is a multiple */
#define NEG -1e30f

typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef _Float16 h16 __attribute__((vector_size(32), aligned(2)));
typedef unsigned short u16x16 __attribute__((vector_size(32), aligned(2)));
typedef unsigned int u32x16 __attribute__((vector_size(64)));

#define INLINE static inline __attribute__((always_inline))

/* W elements of a cache or query row starting at element i, widened to float32. */
INLINE v16 load(int dt, const void *base, long i) {
    if (dt == F32) return *(const v16 *)((const float *)base + i);
    if (dt == F16) return __builtin_convertvector(*(const h16 *)((const _Float16 *)base + i), v16);
    u32x16 wide = __builtin_convertvector(*(const u16x16 *)((const unsigned short *)base + i), u32x16);
    return (v16)(wide << 16);  /* bfloat16 is the top half of a float32 */
}

INLINE float load1(int dt, const void *base, long i) {
    if (dt == F32) return ((const float *)base)[i];
    if (dt == F16) return (float)((const _Float16 *)base)[i];
    union { unsigned int u; float f; } x = { .u = (unsigned int)((const unsigned short *)base)[i] << 16 };
    return x.f;
}

/* Sixteen dot products at once: lane i of the result is the sum of the lanes of x[i]. Four rounds
   of "add the two halves of a pair of vectors", each halving the partial sums per vector, instead of
   sixteen separate horizontal sums. */
INLINE v16 reduce16(v16 *x) {
    for (int i = 0; i < 8; i++)
        x[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               __builtin_shufflevector(x[2 * i], x[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int i = 0; i < 4; i++)
        x[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               __builtin_shufflevector(x[2 * i], x[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    for (int i = 0; i < 2; i++)
        x[i] = __builtin_shufflevector(x[2 * i], x[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
               __builtin_shufflevector(x[2 * i], x[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    return __builtin_shufflevector(x[0], x[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
           __builtin_shufflevector(x[0], x[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

/* Scores of GT query rows (qs, float32, row stride D) against NT = 16 / GT key rows (element offsets
   rows[u] + off): each key vector is loaded once for the GT rows, each query vector once for the NT
   tokens, and the 16 accumulators are independent, so the FMAs do not wait on each other. */
INLINE void qk_tile(int dt, int GT, const float *qs, int D, const void *k, const long *rows, long off,
                    float *sc) {
    const int NT = W / GT;
    v16 a[W];
    for (int i = 0; i < W; i++) a[i] = (v16){0};
    for (int e = 0; e < D; e += W) {
        v16 kv[W];
        for (int u = 0; u < NT; u++) kv[u] = load(dt, k, rows[u] + off + e);
        for (int g = 0; g < GT; g++) {
            v16 qv = *(const v16 *)(qs + g * D + e);
            for (int u = 0; u < NT; u++) a[g * NT + u] += qv * kv[u];
        }
    }
    v16 s = reduce16(a);
    for (int g = 0; g < GT; g++)
        for (int u = 0; u < NT; u++) sc[g * T + u] = s[g * NT + u];
}

/* acc[g][e0 : e0 + NV·W] = α_g·acc[g][…] + Σ_j p[g][j] · v_j[e0 : …] for GT query rows: the accumulators
   live in registers across the block's tokens (the running-max rescale α is applied as they are
   loaded, so acc is never swept separately), and each V vector is loaded once for the GT rows. */
INLINE void pv_tile(int dt, int GT, int NV, const float *p, const float *alpha, float *acc, int D, int e0,
                    const void *v, const long *rows, int n) {
    v16 r[8][4];
    for (int g = 0; g < GT; g++)
        for (int c = 0; c < NV; c++) r[g][c] = *(v16 *)(acc + g * D + e0 + c * W) * alpha[g];
    for (int j = 0; j < n; j++) {
        v16 x[4];
        for (int c = 0; c < NV; c++) x[c] = load(dt, v, rows[j] + e0 + c * W);
        for (int g = 0; g < GT; g++) {
            float pj = p[g * T + j];
            for (int c = 0; c < NV; c++) r[g][c] += pj * x[c];
        }
    }
    for (int g = 0; g < GT; g++)
        for (int c = 0; c < NV; c++) *(v16 *)(acc + g * D + e0 + c * W) = r[g][c];
}

/* Constant tile sizes, so each call above compiles to straight-line register code. */
INLINE void qk_dispatch(int dt, int GT, const float *qs, int D, const void *k, const long *rows, long off, float *sc) {
    if (GT == 8) qk_tile(dt, 8, qs, D, k, rows, off, sc);
    else if (GT == 4) qk_tile(dt, 4, qs, D, k, rows, off, sc);
    else if (GT == 2) qk_tile(dt, 2, qs, D, k, rows, off, sc);
    else qk_tile(dt, 1, qs, D, k, rows, off, sc);
}

/* 16 accumulators per tile: GT rows × NV vectors (8 × 2, 4 × 4; narrower groups take 4 vectors). */
INLINE void pv_dispatch(int dt, int GT, const float *p, const float *alpha, float *acc, int D, const void *v,
                        const long *rows, int n) {
    const int NV = GT == 8 ? 2 : 4;
    int e0 = 0;
    for (; e0 + NV * W <= D; e0 += NV * W) {
        if (GT == 8) pv_tile(dt, 8, 2, p, alpha, acc, D, e0, v, rows, n);
        else if (GT == 4) pv_tile(dt, 4, 4, p, alpha, acc, D, e0, v, rows, n);
        else if (GT == 2) pv_tile(dt, 2, 4, p, alpha, acc, D, e0, v, rows, n);
        else pv_tile(dt, 1, 4, p, alpha, acc, D, e0, v, rows, n);
    }
    for (; e0 < D; e0 += W) {
        if (GT == 8) pv_tile(dt, 8, 1, p, alpha, acc, D, e0, v, rows, n);
        else if (GT == 4) pv_tile(dt, 4, 1, p, alpha, acc, D, e0, v, rows, n);
        else if (GT == 2) pv_tile(dt, 2, 1, p, alpha, acc, D, e0, v, rows, n);
        else pv_tile(dt, 1, 1, p, alpha, acc, D, e0, v, rows, n);
    }
}

typedef struct {
    const void *q, *k, *v;
    long q_batch, q_head;                 /* strides in elements */
    long k_page, k_row, k_head, v_page, v_row, v_head;
    const int *table;                     /* (batch, table_width): page of each block of tokens */
    long table_width;
    int block_size;                       /* tokens per page (a contiguous cache: its max_seqlen) */
    const int *lengths;
    int splits, K, G, DK, DV;             /* key and value widths may differ (MLA: 576 and 512) */
    float scale;
} Problem;

/* Query rows per tile: the widest of 8, 4, 2, 1 that divides the group. */
INLINE int group_tile(int G) { return G % 8 == 0 ? 8 : G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1; }

/* One work item: tokens [t0, t1) of sequence b, all heads; writes H rows of out (width DV) and lse.
   Per block of T tokens, every head tile (GT query rows, GT·DK floats: at most 18 KB, so it stays in
   L1 while the block's key rows stream past it) scores the whole block, then the same tile
   accumulates p·v. A block's rows (T·DK elements, in L2) are fetched from memory once, whatever H is:
   with MLA's shared latent the value rows are the first DV elements of those same key rows. */
INLINE void attend(int dt, const Problem *P, int b, int t0, int t1, float *ws, float *out, float *lse) {
    const int K = P->K, G = P->G, DK = P->DK, DV = P->DV, H = K * G, GT = group_tile(G), NT = W / GT;
    float *qs = ws, *acc = qs + (long)H * DK, *sc = acc + (long)H * DV, *m = sc + (long)H * T, *l = m + H;
    float *alpha = l + H;
    long krow[T + W], vrow[T];
    for (int h = 0; h < H; h++) {
        for (int e = 0; e < DK; e++) qs[h * DK + e] = load1(dt, P->q, b * P->q_batch + h * P->q_head + e) * P->scale;
        m[h] = NEG;
        l[h] = 0;
    }
    memset(acc, 0, sizeof(float) * H * DV);
    const int *pages = P->table + b * P->table_width;
    for (int tb = t0; tb < t1; tb += T) {
        const int n = t1 - tb < T ? t1 - tb : T;
        for (int j = 0; j < n; j++) {
            long page = pages[(tb + j) / P->block_size], slot = (tb + j) % P->block_size;
            krow[j] = page * P->k_page + slot * P->k_row;
            vrow[j] = page * P->v_page + slot * P->v_row;
        }
        for (int j = n; j < n + W; j++) krow[j] = krow[n - 1];  /* pad the last tile by repeating a row */
        for (int kh = 0; kh < K; kh++)
            for (int g = 0; g < G; g += GT)
                for (int j = 0; j < n; j += NT)
                    qk_dispatch(dt, GT, qs + (kh * G + g) * DK, DK, P->k, krow + j, kh * P->k_head,
                                sc + (kh * G + g) * T + j);
        for (int h = 0; h < H; h++) {
            float *s = sc + h * T, top = m[h], total = 0;
            for (int j = 0; j < n; j++) top = s[j] > top ? s[j] : top;
            alpha[h] = expf(m[h] - top);
            for (int j = 0; j < n; j++) {
                s[j] = expf(s[j] - top);
                total += s[j];
            }
            m[h] = top;
            l[h] = l[h] * alpha[h] + total;
        }
        for (int kh = 0; kh < K; kh++) {
            long rows[T];
            for (int j = 0; j < n; j++) rows[j] = vrow[j] + kh * P->v_head;
            for (int g = 0; g < G; g += GT)
                pv_dispatch(dt, GT, sc + (kh * G + g) * T, alpha + kh * G + g, acc + (kh * G + g) * DV, DV, P->v,
                            rows, n);
        }
    }
    for (int h = 0; h < H; h++) {
        const float inv = l[h] > 0 ? 1 / l[h] : 0;
        for (int e = 0; e < DV; e++) out[h * DV + e] = acc[h * DV + e] * inv;
        lse[h] = l[h] > 0 ? m[h] + logf(l[h]) : NEG;
    }
}

INLINE int run(int dt, const Problem *P, int batch, int threads, float *out_part, float *lse_part) {
    const int H = P->K * P->G, S = P->splits;
    const size_t ws_floats = (size_t)H * (P->DK + P->DV + T + 3);
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        float *ws = aligned_alloc(64, (ws_floats * sizeof(float) + 63) / 64 * 64);
        if (!ws) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long item = 0; item < (long)batch * S; item++) {
            if (!ws) continue;
            const int b = item / S, s = item % S, L = P->lengths[b];
            const int per = ((L + S - 1) / S + T - 1) / T * T;  /* whole blocks, except the last */
            const int t0 = s * per < L ? s * per : L, t1 = t0 + per < L ? t0 + per : L;
            attend(dt, P, b, t0, t1, ws, out_part + item * H * P->DV, lse_part + item * H);
        }
        free(ws);
    }
    return failed ? -1 : 0;
}

/* Exported: one call per decode step. out_part (batch, splits, H, DV) and lse_part (batch, splits, H)
   are float32 and contiguous. Returns 0, or -1 when a thread could not allocate its workspace. */
int gqa_decode_cpu(int dtype, const void *q, long q_batch, long q_head,
                   const void *k, long k_page, long k_row, long k_head,
                   const void *v, long v_page, long v_row, long v_head,
                   const int *table, long table_width, int block_size, const int *lengths,
                   int batch, int splits, int K, int G, int DK, int DV, float scale, int threads,
                   float *out_part, float *lse_part) {
    const Problem P = {q, k, v, q_batch, q_head, k_page, k_row, k_head, v_page, v_row, v_head,
                       table, table_width, block_size, lengths, splits, K, G, DK, DV, scale};
    if (dtype == F32) return run(F32, &P, batch, threads, out_part, lse_part);
    if (dtype == F16) return run(F16, &P, batch, threads, out_part, lse_part);
    return run(BF16, &P, batch, threads, out_part, lse_part);
}
