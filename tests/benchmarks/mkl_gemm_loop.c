/* Native loop: DeepBench's Intel GEMM calls (code/intel/gemm/bench.cpp) made its way, for the harness's mkl
 * backend to be held against (mkl_side_by_side.py builds and runs it).
 *
 *   mkl_gemm_loop [--trials N] [--beta B] [--packed] [--threads N] [PREC,TRANSA,TRANSB,M,N,K ...]
 *
 * Without problems on the command line, one is read from each line of stdin: "PREC TRANSA TRANSB M N K"
 * (PREC fp32 or int8, TRANSA/TRANSB N or T; blank lines and # comments skipped).
 *
 * As bench.cpp: column-major operands in mkl_malloc'd memory aligned to 4 KiB, every leading dimension
 * FIX_LD(rows) = ((rows + 127) / 128) * 128 + 16 of the stored matrix (lda: k if transa else m; ldb: n if
 * transb else k; ldc: m), m, n and k as listed; fp32 cblas_sgemm on drand48() data (A, B and C, the
 * padding included), int8 cblas_gemm_s8u8s32 (A int8 = 11, B uint8 = 22, C int32 = 33, CblasFixOffset, zero
 * offsets); alpha = 1 and beta = 1 (--beta 0: the harness's beta); one warm-up call, then 10 calls timed
 * together with dsecnd(), their mean the problem's time. --packed: A and B packed first (cblas_*_pack, as
 * bench.cpp's PACKED_API did for fp32; int8 through MKL's s8u8s32 packed API, which bench.cpp predates),
 * the calls cblas_*_compute on them. --trials N repeats that measurement N times (DeepBench: once).
 * Unlike bench.cpp, each problem gets buffers of its own size (bench.cpp sized B by the largest A).
 *
 * Output: '#' lines saying what MKL runs (version, instruction set, threads), then one line per problem:
 *   PREC TRANSA TRANSB M N K LDA LDB LDC MEDIAN_US OTHERS US_1 ... US_N
 * or "error PREC TRANSA TRANSB M N K: why". OTHERS: the CPU cores other processes kept busy on average while
 * the calls were timed, as the harness reckons it for its samples (kernels/noise.py CpuWindow): /proc/stat's
 * busy time (user, nice, system, irq, softirq, steal) less this process's own CPU time, over the wall time.
 * Exit status 0, or 2 on a bad command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mkl.h>

#define FIX_LD(x) (((((x) + 127) / 128) * 128) + 16)
#define REPEAT 10
#define MKL_MEM_ALIGNMENT (4 * 1024)
#define MAX_TRIALS 1000
#define LINE_CHARS 512
#define VERSION_CHARS 256

typedef struct {
    char prec[16];
    char transa, transb;
    MKL_INT m, n, k;
} problem_t;

typedef struct {
    int trials;
    float beta;
    int packed;
} options_t;

typedef struct {
    void *a, *b, *c, *ap, *bp;
    MKL_INT lda, ldb, ldc;
} buffers_t;

static int is_int8(const problem_t *p) { return strcmp(p->prec, "int8") == 0; }

static CBLAS_TRANSPOSE trans(char t) { return t == 'T' ? CblasTrans : CblasNoTrans; }

/* The stored A is k x m when transposed (else m x k), B n x k (else k x n), C m x n: their columns times
 * their leading dimensions, as bench.cpp sized them. */
static int allocate(const problem_t *p, buffers_t *buf) {
    size_t elem_ab = is_int8(p) ? 1 : sizeof(float), elem_c = is_int8(p) ? sizeof(MKL_INT32) : sizeof(float);
    buf->lda = FIX_LD(p->transa == 'T' ? p->k : p->m);
    buf->ldb = FIX_LD(p->transb == 'T' ? p->n : p->k);
    buf->ldc = FIX_LD(p->m);
    size_t size_a = (size_t)buf->lda * (p->transa == 'T' ? p->m : p->k);
    size_t size_b = (size_t)buf->ldb * (p->transb == 'T' ? p->k : p->n);
    size_t size_c = (size_t)buf->ldc * p->n;
    buf->a = mkl_malloc(size_a * elem_ab, MKL_MEM_ALIGNMENT);
    buf->b = mkl_malloc(size_b * elem_ab, MKL_MEM_ALIGNMENT);
    buf->c = mkl_malloc(size_c * elem_c, MKL_MEM_ALIGNMENT);
    buf->ap = buf->bp = NULL;
    if (!buf->a || !buf->b || !buf->c) return 0;
    if (is_int8(p)) { /* bench.cpp's IGEMM_S8U8S32 data */
        memset(buf->a, 11, size_a);
        memset(buf->b, 22, size_b);
        for (size_t i = 0; i < size_c; ++i) ((MKL_INT32 *)buf->c)[i] = 33;
    } else {
        for (size_t i = 0; i < size_a; ++i) ((float *)buf->a)[i] = (float)drand48();
        for (size_t i = 0; i < size_b; ++i) ((float *)buf->b)[i] = (float)drand48();
        for (size_t i = 0; i < size_c; ++i) ((float *)buf->c)[i] = (float)drand48();
    }
    return 1;
}

static void release(buffers_t *buf) {
    mkl_free(buf->a);
    mkl_free(buf->b);
    mkl_free(buf->c);
    mkl_free(buf->ap);
    mkl_free(buf->bp);
}

/* A and B packed once, as bench.cpp's PACKED_API (sgemm_pack "A" and "B" with alpha = 1). */
static int pack(const problem_t *p, buffers_t *buf) {
    if (is_int8(p)) {
        buf->ap = mkl_malloc(cblas_gemm_s8u8s32_pack_get_size(CblasAMatrix, p->m, p->n, p->k), MKL_MEM_ALIGNMENT);
        buf->bp = mkl_malloc(cblas_gemm_s8u8s32_pack_get_size(CblasBMatrix, p->m, p->n, p->k), MKL_MEM_ALIGNMENT);
        if (!buf->ap || !buf->bp) return 0;
        cblas_gemm_s8u8s32_pack(CblasColMajor, CblasAMatrix, trans(p->transa), p->m, p->n, p->k, buf->a, buf->lda,
                                buf->ap);
        cblas_gemm_s8u8s32_pack(CblasColMajor, CblasBMatrix, trans(p->transb), p->m, p->n, p->k, buf->b, buf->ldb,
                                buf->bp);
    } else {
        buf->ap = mkl_malloc(cblas_sgemm_pack_get_size(CblasAMatrix, p->m, p->n, p->k), MKL_MEM_ALIGNMENT);
        buf->bp = mkl_malloc(cblas_sgemm_pack_get_size(CblasBMatrix, p->m, p->n, p->k), MKL_MEM_ALIGNMENT);
        if (!buf->ap || !buf->bp) return 0;
        cblas_sgemm_pack(CblasColMajor, CblasAMatrix, trans(p->transa), p->m, p->n, p->k, 1.0f, buf->a, buf->lda,
                         buf->ap);
        cblas_sgemm_pack(CblasColMajor, CblasBMatrix, trans(p->transb), p->m, p->n, p->k, 1.0f, buf->b, buf->ldb,
                         buf->bp);
    }
    return 1;
}

static void call(const problem_t *p, const options_t *o, const buffers_t *buf) {
    const MKL_INT32 co = 0;
    if (is_int8(p) && o->packed)
        cblas_gemm_s8u8s32_compute(CblasColMajor, CblasPacked, CblasPacked, CblasFixOffset, p->m, p->n, p->k, 1.0f,
                                   buf->ap, buf->lda, 0, buf->bp, buf->ldb, 0, o->beta, buf->c, buf->ldc, &co);
    else if (is_int8(p))
        cblas_gemm_s8u8s32(CblasColMajor, trans(p->transa), trans(p->transb), CblasFixOffset, p->m, p->n, p->k, 1.0f,
                           buf->a, buf->lda, 0, buf->b, buf->ldb, 0, o->beta, buf->c, buf->ldc, &co);
    else if (o->packed)
        cblas_sgemm_compute(CblasColMajor, CblasPacked, CblasPacked, p->m, p->n, p->k, buf->ap, buf->lda, buf->bp,
                            buf->ldb, o->beta, buf->c, buf->ldc);
    else
        cblas_sgemm(CblasColMajor, trans(p->transa), trans(p->transb), p->m, p->n, p->k, 1.0f, buf->a, buf->lda,
                    buf->b, buf->ldb, o->beta, buf->c, buf->ldc);
}

/* /proc/stat's busy seconds of every CPU since boot (noise.py BUSY_FIELDS), or -1 where it cannot be read. */
static double busy_seconds(void) {
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    int got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                     &v[6], &v[7]);
    fclose(f);
    if (got < 8) return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / sysconf(_SC_CLK_TCK);
}

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void run(const problem_t *p, const options_t *o) {
    buffers_t buf;
    double us[MAX_TRIALS], sorted[MAX_TRIALS];
    if (!allocate(p, &buf) || (o->packed && !pack(p, &buf))) {
        printf("error %s %c %c %d %d %d: out of memory\n", p->prec, p->transa, p->transb, (int)p->m, (int)p->n,
               (int)p->k);
        release(&buf);
        return;
    }
    double others = 0, wall = 0;
    for (int t = 0; t < o->trials; ++t) {
        call(p, o, &buf); /* warm-up */
        double busy_start = busy_seconds(), cpu_start = seconds(CLOCK_PROCESS_CPUTIME_ID);
        double start = dsecnd();
        for (int j = 0; j < REPEAT; ++j) call(p, o, &buf);
        double end = dsecnd();
        others += (busy_seconds() - busy_start) - (seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start);
        wall += end - start;
        us[t] = 1e6 * (end - start) / REPEAT;
    }
    memcpy(sorted, us, sizeof(double) * o->trials);
    qsort(sorted, o->trials, sizeof(double), by_value);
    double median = o->trials % 2 ? sorted[o->trials / 2] : 0.5 * (sorted[o->trials / 2 - 1] + sorted[o->trials / 2]);
    printf("%s %c %c %d %d %d %d %d %d %.3f %.3f", p->prec, p->transa, p->transb, (int)p->m, (int)p->n, (int)p->k,
           (int)buf.lda, (int)buf.ldb, (int)buf.ldc, median, others > 0 ? others / wall : 0.0);
    for (int t = 0; t < o->trials; ++t) printf(" %.3f", us[t]);
    printf("\n");
    fflush(stdout);
    release(&buf);
}

/* "fp32 N T 5124 700 2048" (separator ' ') or "fp32,N,T,5124,700,2048" (','): 1 if it is a problem. */
static int parse(const char *text, char sep, problem_t *p) {
    char fmt[64];
    int m, n, k;
    snprintf(fmt, sizeof fmt, "%%15[a-z0-9]%c%%c%c%%c%c%%d%c%%d%c%%d", sep, sep, sep, sep, sep);
    if (sscanf(text, fmt, p->prec, &p->transa, &p->transb, &m, &n, &k) != 6) return 0;
    p->m = m, p->n = n, p->k = k;
    return (strcmp(p->prec, "fp32") == 0 || is_int8(p)) && strchr("NT", p->transa) && strchr("NT", p->transb) &&
           m > 0 && n > 0 && k > 0;
}

static void header(const options_t *o) {
    char version[VERSION_CHARS];
    MKLVersion v;
    mkl_get_version_string(version, VERSION_CHARS);
    mkl_get_version(&v);
    printf("# mkl %s\n# isa %s\n", version, v.Processor);
    printf("# threads %d dynamic %d\n", mkl_get_max_threads(), mkl_get_dynamic());
    printf("# mode %s beta %g trials %d repeat %d\n", o->packed ? "packed" : "direct", o->beta, o->trials, REPEAT);
    fflush(stdout);
}

static int usage(void) {
    fprintf(stderr, "usage: mkl_gemm_loop [--trials N] [--beta B] [--packed] [--threads N] [PREC,TA,TB,M,N,K ...]\n");
    return 2;
}

int main(int argc, char **argv) {
    options_t o = {1, 1.0f, 0};
    int first = 1;
    for (; first < argc && strncmp(argv[first], "--", 2) == 0; ++first) {
        if (strcmp(argv[first], "--packed") == 0) {
            o.packed = 1;
        } else if (first + 1 < argc && strcmp(argv[first], "--trials") == 0) {
            o.trials = atoi(argv[++first]);
        } else if (first + 1 < argc && strcmp(argv[first], "--beta") == 0) {
            o.beta = (float)atof(argv[++first]);
        } else if (first + 1 < argc && strcmp(argv[first], "--threads") == 0) {
            mkl_set_num_threads(atoi(argv[++first]));
        } else {
            return usage();
        }
    }
    if (o.trials < 1 || o.trials > MAX_TRIALS) return usage();
    header(&o);
    problem_t p;
    if (first < argc) {
        for (int i = first; i < argc; ++i) {
            if (!parse(argv[i], ',', &p)) {
                fprintf(stderr, "not a problem: %s (PREC,TRANSA,TRANSB,M,N,K; PREC fp32 or int8)\n", argv[i]);
                return 2;
            }
            run(&p, &o);
        }
        return 0;
    }
    char line[LINE_CHARS];
    while (fgets(line, sizeof line, stdin)) {
        char *text = line + strspn(line, " \t");
        if (*text == '#' || *text == '\n' || *text == '\0') continue;
        if (!parse(text, ' ', &p)) {
            printf("error %s", text);
            continue;
        }
        run(&p, &o);
    }
    return 0;
}
