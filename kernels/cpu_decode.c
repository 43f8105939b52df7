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
   decode does about 2H FLOPs per cached element and is compute-bound on a CPU: for groups of 32 and
   more the query block is transposed once per work item, and q·k runs as outer products (32 query
   rows × 8 tokens of accumulators, one broadcast key element per 2 FMAs, no horizontal sums),
   which is what keeps the FMA units fed.

   Math, per query head h (KV head h / G), over the tokens of one slice in blocks of T:
       s_t   = scale · q_h · k_t                     (DK-wide)   scores of the block
       m'    = max(m, max_t s_t),   α = exp(m − m')             running max and rescale factor
       l     = α·l + Σ_t exp(s_t − m')
       acc   = α·acc + Σ_t exp(s_t − m') · v_t       (DV-wide; MLA: v_t = k_t[0 : DV])
   and at the end of the slice o = acc / l, lse = m + log l. The slices of one sequence are merged
   by their lse in Python (kernels/torch_decode.merge), as Flash-Decoding does on a GPU.

   Memory: each block's value rows and the next block's key rows are prefetched into L2 while the
   block's scores are computed, spread over the score loop (prefetch_rows says why L2 and what it
   bought), so the loads of the inner loops hit L2 and DRAM streams under the arithmetic. Threads
   split the context (the caller cuts each sequence into `splits` slices, kernels/cpu_decode.py
   splits_for), not only the heads, so one long sequence keeps every core busy.

   Built with -ffast-math (vectorised expf from libmvec), so no infinity ever enters the
   arithmetic: the running max starts at NEG, and an empty slice reports lse = NEG, which the
   caller turns into −inf. All arithmetic is float32; fp16/bf16 inputs are widened on load. */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { F32 = 0, F16 = 1, BF16 = 2 };
#define T 32          /* tokens per block: the block's scores stay in L1, its rows in L2 */
#define W 16          /* floats per vector; T is a multiple */
#define NEG -1e30f

typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef _Float16 h16 __attribute__((vector_size(32), aligned(2)));
typedef unsigned short u16x16 __attribute__((vector_size(32), aligned(2)));
typedef unsigned int u32x16 __attribute__((vector_size(64)));

#define INLINE static inline __attribute__((always_inline))

/* Sixteen float16 values widened to float32. GCC 12 turns __builtin_convertvector on _Float16 vectors
   into one scalar vcvtph2ps per element on CPUs without AVX512-FP16 (that made fp16 2-3x slower than
   fp32 for half the bytes), so the conversion instructions are named here: one AVX-512 vcvtph2ps of
   16 lanes, else two F16C ones of 8, else the compiler's scalar conversion. The library is compiled
   with -march=native on the machine that loads it (kernels/cpu_decode.py keys the build by this CPU's
   feature flags), so these compile-time tests are the run-time check of this CPU. */
INLINE v16 widen_f16(const _Float16 *p) {
#if defined(__AVX512F__)
    return (v16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
#elif defined(__F16C__) && defined(__AVX__)
    typedef float v8 __attribute__((vector_size(32)));
    const v8 lo = (v8)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    const v8 hi = (v8)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8)));
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
    return __builtin_convertvector(*(const h16 *)p, v16);
#endif
}

/* W elements of a cache or query row starting at element i, widened to float32. */
INLINE v16 load(int dt, const void *base, long i) {
    if (dt == F32) return *(const v16 *)((const float *)base + i);
    if (dt == F16) return widen_f16((const _Float16 *)base + i);
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
   tokens, and the 16 accumulators are independent, so the FMAs do not wait on each other. Scores are
   stored token-major, sc[u·H + g]. */
INLINE void qk_tile(int dt, int GT, const float *qs, int D, const void *k, const long *rows, long off,
                    float *sc, int H) {
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
        for (int u = 0; u < NT; u++) sc[u * H + g] = s[g * NT + u];
}

/* The same scores for 32 query rows of a group of 32 or more (MLA's 32 to 128 heads) against NQ = 8
   key rows, from the query block transposed (qt[e·G + g], made once per work item): each key element
   is broadcast once for 32 rows (2 FMAs per load instead of the 1.6 above), the 16 accumulators are
   score vectors over heads, and nothing needs a horizontal sum. */
#define NQ 8
INLINE void qkt_tile(int dt, const float *qt, int G, int D, const void *k, const long *rows, long off, float *sc,
                     int H) {
    v16 a[2][NQ];
    for (int u = 0; u < NQ; u++) a[0][u] = a[1][u] = (v16){0};
    for (int e = 0; e < D; e++) {
        const v16 q0 = *(const v16 *)(qt + (long)e * G), q1 = *(const v16 *)(qt + (long)e * G + W);
        for (int u = 0; u < NQ; u++) {
            const float x = load1(dt, k, rows[u] + off + e);
            a[0][u] += q0 * x;
            a[1][u] += q1 * x;
        }
    }
    for (int u = 0; u < NQ; u++) {
        *(v16 *)(sc + u * H) = a[0][u];
        *(v16 *)(sc + u * H + W) = a[1][u];
    }
}

/* acc[g][e0 : e0 + NV·W] = α_g·acc[g][…] + Σ_j p[j·H + g] · v_j[e0 : …] for GT query rows: the accumulators
   live in registers across the block's tokens (the running-max rescale α is applied as they are
   loaded, so acc is never swept separately), and each V vector is loaded once for the GT rows. */
INLINE void pv_tile(int dt, int GT, int NV, const float *p, int H, const float *alpha, float *acc, int D, int e0,
                    const void *v, const long *rows, int n) {
    v16 r[4][4];
    for (int g = 0; g < GT; g++)
        for (int c = 0; c < NV; c++) r[g][c] = *(v16 *)(acc + g * D + e0 + c * W) * alpha[g];
    for (int j = 0; j < n; j++) {
        v16 x[4];
        for (int c = 0; c < NV; c++) x[c] = load(dt, v, rows[j] + e0 + c * W);
        for (int g = 0; g < GT; g++) {
            float pj = p[j * H + g];
            for (int c = 0; c < NV; c++) r[g][c] += pj * x[c];
        }
    }
    for (int g = 0; g < GT; g++)
        for (int c = 0; c < NV; c++) *(v16 *)(acc + g * D + e0 + c * W) = r[g][c];
}

/* Constant tile sizes, so each call above compiles to straight-line register code. */
INLINE void qk_dispatch(int dt, int GT, const float *qs, int D, const void *k, const long *rows, long off, float *sc,
                        int H) {
    if (GT == 4) qk_tile(dt, 4, qs, D, k, rows, off, sc, H);
    else if (GT == 2) qk_tile(dt, 2, qs, D, k, rows, off, sc, H);
    else qk_tile(dt, 1, qs, D, k, rows, off, sc, H);
}

INLINE void pv_dispatch(int dt, int GT, const float *p, int H, const float *alpha, float *acc, int D, const void *v,
                        const long *rows, int n) {
    int e0 = 0;
    for (; e0 + 4 * W <= D; e0 += 4 * W) {
        if (GT == 4) pv_tile(dt, 4, 4, p, H, alpha, acc, D, e0, v, rows, n);
        else if (GT == 2) pv_tile(dt, 2, 4, p, H, alpha, acc, D, e0, v, rows, n);
        else pv_tile(dt, 1, 4, p, H, alpha, acc, D, e0, v, rows, n);
    }
    for (; e0 < D; e0 += W) {
        if (GT == 4) pv_tile(dt, 4, 1, p, H, alpha, acc, D, e0, v, rows, n);
        else if (GT == 2) pv_tile(dt, 2, 1, p, H, alpha, acc, D, e0, v, rows, n);
        else pv_tile(dt, 1, 1, p, H, alpha, acc, D, e0, v, rows, n);
    }
}

/* Scores of one KV head's G query rows (G a multiple of 32) against the block's n key rows: each tile
   of 32 transposed query rows (72 KB at DK = 576, in L2) scores the whole block before the next, so
   the query block is read once per block and the block's rows (in L2) once per tile. */
INLINE void qkt_dispatch(int dt, const float *qt, int G, int D, const void *k, const long *rows, long off, int n,
                         float *sc, int H) {
    for (int g = 0; g < G; g += 2 * W)
        for (int j = 0; j < n; j += NQ) qkt_tile(dt, qt + g, G, D, k, rows + j, off, sc + j * H + g, H);
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

/* Query rows per tile: the widest of 4, 2, 1 that divides the group. */
INLINE int group_tile(int G) { return G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1; }

/* Element offsets of the key and value rows of tokens [tb, min(tb + T, t1)) of one sequence (through
   its page table); returns how many. */
INLINE int rows_of(const Problem *P, const int *pages, int tb, int t1, long *krow, long *vrow) {
    const int n = t1 - tb < T ? t1 - tb : T;
    for (int j = 0; j < n; j++) {
        const long page = pages[(tb + j) / P->block_size], slot = (tb + j) % P->block_size;
        krow[j] = page * P->k_page + slot * P->k_row;
        vrow[j] = page * P->v_page + slot * P->v_row;
    }
    return n;
}

/* Ask for the cache lines of n rows (element offsets rows[j] + off, bytes long each) ahead of use,
   into L2 (prefetcht1), not L1: a block's rows (128 KB of keys and as much of values for Llama-3-8B
   in fp32) would evict the query tiles and scores from L1's 32 KB. Timed on this CPU (Zen 4, one
   thread, 32k tokens, CPU time on a loaded machine): into L1 the kernel read at 59-72% of a plain
   read loop's rate, into L2 at 82-91% (fp32) and 65-67% (fp16). */
INLINE void prefetch_rows(const void *base, int es, const long *rows, int n, long off, int bytes) {
    for (int j = 0; j < n; j++) {
        const char *row = (const char *)base + (rows[j] + off) * es;
        for (int c = 0; c < bytes; c += 64) __builtin_prefetch(row + c, 0, 2);
    }
}

/* One work item: tokens [t0, t1) of sequence b, all heads; writes H rows of out (width DV) and lse.
   Per block of T tokens, the scores of every query row against the block come first (token-major,
   sc[t·H + h], so the softmax below runs across heads in whole vectors), then every head tile
   accumulates p·v. Query tiles stay in L1 while the block's rows stream past them; a block's rows
   (T·DK elements, in L2) are fetched from memory once, whatever H is: with MLA's shared latent the
   value rows are the first DV elements of those same key rows. */
INLINE void attend(int dt, const Problem *P, int b, int t0, int t1, float *ws, float *out, float *lse) {
    const int K = P->K, G = P->G, DK = P->DK, DV = P->DV, H = K * G, GT = group_tile(G), NT = W / GT;
    const int wide = G % (2 * W) == 0;  /* transposed-query tiles: groups of 32 and more (MLA) */
    float *qs = ws, *acc = qs + (long)H * DK, *sc = acc + (long)H * DV, *m = sc + (long)H * (T + W), *l = m + H;
    float *alpha = l + H, *top = alpha + H;
    long krow[T + W], vrow[T], nrow[T], nvrow[T];
    for (int kh = 0; kh < K; kh++)
        for (int g = 0; g < G; g++) {
            const int h = kh * G + g;
            for (int e = 0; e < DK; e++) {
                const float x = load1(dt, P->q, b * P->q_batch + h * P->q_head + e) * P->scale;
                if (wide) qs[((long)kh * DK + e) * G + g] = x;  /* qt: one KV head's rows, transposed */
                else qs[(long)h * DK + e] = x;
            }
        }
    for (int h = 0; h < H; h++) {
        m[h] = NEG;
        l[h] = 0;
    }
    memset(acc, 0, sizeof(float) * H * DV);
    const int *pages = P->table + b * P->table_width;
    const int es = dt == F32 ? 4 : 2, kbytes = DK * es, vbytes = DV * es;
    const int shared = P->v == P->k && P->v_head == P->k_head && P->v_row == P->k_row && P->v_page == P->k_page;
    /* krow/vrow: element offsets of this block's rows; nrow/nvrow: the next block's, known a block
       ahead so that its keys can be prefetched. */
    int n = rows_of(P, pages, t0, t1, krow, vrow);
    for (int tb = t0; tb < t1; tb += T) {
        for (int j = n; j < n + W; j++) krow[j] = krow[n - 1];  /* pad the last tile by repeating a row */
        const int next = tb + T < t1 ? rows_of(P, pages, tb + T, t1, nrow, nvrow) : 0;
        if (wide)
            for (int kh = 0; kh < K; kh++)
                qkt_dispatch(dt, qs + (long)kh * DK * G, G, DK, P->k, krow, kh * P->k_head, n, sc + kh * G, H);
        else  /* token groups outermost: a row's K heads are read together, in address order */
            for (int j = 0; j < n; j += NT)
                for (int kh = 0; kh < K; kh++) {
                    for (int g = 0; g < G; g += GT)
                        qk_dispatch(dt, GT, qs + (long)(kh * G + g) * DK, DK, P->k, krow + j, kh * P->k_head,
                                    sc + j * H + kh * G + g, H);
                    /* Spread over the score loop, so the memory system always has lines to fetch and
                       never a burst: this block's value rows (p·v below reads them head by head, K·d
                       apart, which the hardware prefetchers follow badly) and the next block's keys. */
                    if (!shared)
                        prefetch_rows(P->v, es, vrow + j, j + NT < n ? NT : n - j, kh * P->v_head, vbytes);
                    if (j < next)
                        prefetch_rows(P->k, es, nrow + j, j + NT < next ? NT : next - j, kh * P->k_head, kbytes);
                }
        /* Online softmax, vectorised across heads: running max, rescale factor, weights, running sum. */
        for (int h = 0; h < H; h++) top[h] = m[h];
        for (int j = 0; j < n; j++)
            for (int h = 0; h < H; h++) top[h] = sc[j * H + h] > top[h] ? sc[j * H + h] : top[h];
        for (int h = 0; h < H; h++) {
            alpha[h] = expf(m[h] - top[h]);
            l[h] *= alpha[h];
            m[h] = top[h];
        }
        for (int j = 0; j < n; j++)
            for (int h = 0; h < H; h++) {
                const float p = expf(sc[j * H + h] - top[h]);
                sc[j * H + h] = p;
                l[h] += p;
            }
        for (int kh = 0; kh < K; kh++) {
            long rows[T];
            for (int j = 0; j < n; j++) rows[j] = vrow[j] + kh * P->v_head;
            for (int g = 0; g < G; g += GT)
                pv_dispatch(dt, GT, sc + kh * G + g, H, alpha + kh * G + g, acc + (long)(kh * G + g) * DV, DV, P->v,
                            rows, n);
            if (wide) prefetch_rows(P->k, es, nrow, next, kh * P->k_head, kbytes);  /* the next block's latent rows */
        }
        memcpy(krow, nrow, sizeof(long) * next);
        memcpy(vrow, nvrow, sizeof(long) * next);
        n = next;
    }
    for (int h = 0; h < H; h++) {
        const float inv = l[h] > 0 ? 1 / l[h] : 0;
        for (int e = 0; e < DV; e++) out[h * DV + e] = acc[h * DV + e] * inv;
        lse[h] = l[h] > 0 ? m[h] + logf(l[h]) : NEG;
    }
}

INLINE int run(int dt, const Problem *P, int batch, int threads, float *out_part, float *lse_part) {
    const int H = P->K * P->G, S = P->splits;
    const size_t ws_floats = (size_t)H * (P->DK + P->DV + T + W + 4);
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

/* The read ceiling the benchmark sets beside the kernel (benchmarks/decode_attention.py): every
   64-byte line of n buffers read once, front to back, each thread a contiguous share, by the same
   number of OpenMP threads as the kernel, into integer sums (no floating point, so no bit pattern is
   ever a slow subnormal) in four independent chains. Returns the sum so the loads stay. A tail under
   256 bytes per buffer is left unread (kernels/cpu_decode.py read_lines counts only what was read). */
typedef unsigned long long u64x8 __attribute__((vector_size(64), aligned(8)));

unsigned long long read_lines(int n, const void *const *buffers, const long *bytes, int threads) {
    long groups = 0;
    for (int i = 0; i < n; i++) groups += bytes[i] / 256;
    unsigned long long total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {   /* one parallel region; each thread a contiguous share of the buffers' groups, in order */
        const long nt = omp_get_num_threads(), per = (groups + nt - 1) / nt, g0 = omp_get_thread_num() * per;
        const long g1 = g0 + per < groups ? g0 + per : groups;
        u64x8 a = {0}, b = {0}, x = {0}, y = {0};
        long first = 0;  /* index of the first group of buffer i in the concatenation */
        for (int i = 0; i < n && first < g1; first += bytes[i] / 256, i++) {
            const long lo = g0 > first ? g0 - first : 0, hi = g1 - first < bytes[i] / 256 ? g1 - first : bytes[i] / 256;
            for (long g = lo; g < hi; g++) {
                const char *line = (const char *)buffers[i] + g * 256;
                a += *(const u64x8 *)line;
                b += *(const u64x8 *)(line + 64);
                x += *(const u64x8 *)(line + 128);
                y += *(const u64x8 *)(line + 192);
            }
        }
        const u64x8 s = (a + b) + (x + y);
        for (int k = 0; k < 8; k++) total += s[k];
    }
    return total;
}
