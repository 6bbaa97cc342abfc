/* Eigen-solutions and modes of many small real matrices in one call from Python
 * (flexmodal_ros.linalg.lapack.RepeatedEig.modes_many; the AMA of flexmodal_ros.flexible_joint.modal).
 *
 * Built at install time into the extension flexmodal_ros.linalg.lapack_kernel (lapack_kernel.pyx,
 * setup.py ext_modules), which passes SciPy's documented LAPACK entry point
 * scipy.linalg.cython_lapack.dgeev (Fortran calling convention, LP64) and calls
 * flexmodal_eig_modes without the GIL. Why C: the GIL is released once per batch instead of once
 * per matrix, and the mode extraction of one spectrum (~20 small NumPy operations, 15-35 us) takes
 * ~1 us.
 *
 * Conventions are those of flexmodal_ros.modes (module docstring there), computed as
 * modes.spectrum_modes does with NumPy (the reference implementation and the fallback):
 * a mode is an eigenvalue with Im > REAL_RTOL |lambda|, sorted by |lambda| (stable); f = |lambda|/2pi (2.16),
 * zeta = -Re lambda/|lambda| (2.17); its shape is the first `rows` rows of vr[:, j] + i vr[:, j+1]
 * scaled to unit norm with the component of largest modulus real and positive. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lapack_batch.h"

#define MAX_ORDER FLEXMODAL_EIG_MAX_ORDER
#define REAL_RTOL 1e-9    /* flexmodal_ros.modes.REAL_RTOL: the real/oscillatory rule */

/* Modes of one spectrum wr + i wi (n) with right vectors vr (column-major n x n, or NULL):
 * returns the number of modes m (<= n/2); fills freq, zeta (m), lam (2m: re, im), shapes (rows x
 * `width` complex, row-major, first m columns used; skipped without vr), real (the *nreal real
 * eigenvalues, ascending; only when 2m < n, else *nreal = 0) and *near = 1 when the largest
 * Re lambda is within rtol * (a bound on max |lambda|) of the imaginary axis (the caller then
 * classifies the stability from the whole spectrum), else 0 (asymptotically stable). */
static int64_t spectrum_modes(int64_t n, const double *wr, const double *wi, const double *vr,
                              int64_t rows, int64_t width, double rtol, double *freq, double *zeta,
                              double *lam, double *shapes, double *real, int64_t *nreal,
                              int64_t *near)
{
    int64_t idx[MAX_ORDER / 2];
    double omega[MAX_ORDER / 2];
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {
        double w = hypot(wr[j], wi[j]);
        if (wi[j] > REAL_RTOL * w) {                  /* insertion keeps equal |lambda| in order */
            int64_t k = m++;
            while (k > 0 && omega[k - 1] > w) {
                omega[k] = omega[k - 1];
                idx[k] = idx[k - 1];
                --k;
            }
            omega[k] = w;
            idx[k] = j;
        }
    }
    const double inv_two_pi = 1.0 / 6.283185307179586;    /* 2 pi, as modes.TWO_PI */
    for (int64_t k = 0; k < m; ++k) {
        int64_t j = idx[k];
        freq[k] = omega[k] * inv_two_pi;
        zeta[k] = wr[j] / -omega[k];
        lam[2 * k] = wr[j];
        lam[2 * k + 1] = wi[j];
        if (vr == NULL)
            continue;
        const double *re = vr + j * n, *im = vr + (j + 1) * n;
        int64_t pivot = 0;
        double largest = -1.0, sum = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
            double mag = hypot(re[r], im[r]);
            sum += mag * mag;
            if (mag > largest) {
                largest = mag;
                pivot = r;
            }
        }
        /* |p| / (p * norm) = conj(p) / (|p| * norm) */
        double denom = largest * sqrt(sum);
        double sr = denom > 0.0 ? re[pivot] / denom : 0.0, si = denom > 0.0 ? -im[pivot] / denom : 0.0;
        for (int64_t r = 0; r < rows; ++r) {
            double *out = shapes + 2 * (r * width + k);
            out[0] = re[r] * sr - im[r] * si;
            out[1] = re[r] * si + im[r] * sr;
        }
        double *out = shapes + 2 * (pivot * width + k);
        out[1] = 0.0;                                 /* exactly real (rounding leaves ~1e-17) */
    }
    double top = n ? wr[0] : 0.0, bottom = top;
    for (int64_t j = 1; j < n; ++j) {
        top = wr[j] > top ? wr[j] : top;
        bottom = wr[j] < bottom ? wr[j] : bottom;
    }
    double bound = m ? omega[m - 1] : 0.0;
    bound = -bottom > bound ? -bottom : bound;
    bound = top > bound ? top : bound;
    *near = n && top >= -rtol * bound;
    *nreal = 0;
    if (2 * m < n) {
        for (int64_t j = 0; j < n; ++j) {
            if (fabs(wi[j]) <= REAL_RTOL * hypot(wr[j], wi[j])) {
                int64_t k = (*nreal)++;
                while (k > 0 && real[k - 1] > wr[j]) {
                    real[k] = real[k - 1];
                    --k;
                }
                real[k] = wr[j];
            }
        }
    }
    return m;
}

/* State matrix (2.14) of the flexible-joint closed loop, n = 4q, column-major into a: the
 * configuration-independent `tpl` (n x n, column-major) with the link rows 2q..3q-1, columns
 * 0..3q-1 replaced by -Minv (rhs + [KG 0 0]) (flexmodal_ros.flexible_joint.linear_model.single_state_matrix);
 * rhs (q x 3q), minv and kg (q x q) row-major. */
static void state_matrix(int64_t q, const double *tpl, const double *rhs, const double *minv,
                         const double *kg, double *a)
{
    const int64_t n = 4 * q, width = 3 * q;
    for (int64_t i = 0; i < n * n; ++i)
        a[i] = tpl[i];
    for (int64_t c = 0; c < width; ++c) {
        for (int64_t r = 0; r < q; ++r) {
            double sum = 0.0;
            for (int64_t k = 0; k < q; ++k)
                sum += minv[r * q + k] * (rhs[k * width + c] + (c < q ? kg[k * q + c] : 0.0));
            a[(2 * q + r) + c * n] = -sum;
        }
    }
}

/* dgeev, then spectrum_modes, for the c->count matrices in c->a; with c->minv not NULL, matrix b
 * is first assembled there by state_matrix from tpl, rhs, minv + b q q and kg + b q q. Returns
 * -1 on success, else the index of the first entry LAPACK failed on (its info in c->info), or -2
 * if n exceeds MAX_ORDER. */
int64_t flexmodal_eig_modes(struct eig_modes_call *c, flexmodal_dgeev solve)
{
    const int64_t h = c->n / 2, q = c->n / 4, rows = c->rows;
    int n = (int)c->n, one = 1, lwork = (int)c->lwork, info = 0;
    char jobvl = 'N', jobvr = c->vectors ? 'V' : 'N';
    double unused = 0.0;
    if (c->n > MAX_ORDER)
        return -2;
    for (int64_t b = 0; b < c->count; ++b) {
        double *a = c->a + b * c->n * c->n;
        if (c->minv != NULL)
            state_matrix(q, c->tpl, c->rhs, c->minv + b * q * q, c->kg + b * q * q, a);
        solve(&jobvl, &jobvr, &n, a, &n, c->wr + b * n, c->wi + b * n, &unused, &one,
              c->vectors ? c->vr : &unused, c->vectors ? &n : &one, c->work, &lwork, &info);
        c->info = info;
        if (info != 0)
            return b;
        int64_t near;
        c->modes[b] = spectrum_modes(n, c->wr + b * n, c->wi + b * n, c->vectors ? c->vr : NULL,
                                     rows, h, c->rtol, c->freq + b * h, c->zeta + b * h,
                                     c->lam + 2 * b * h, c->shapes + 2 * b * rows * h,
                                     c->real + b * n, c->nreal + b, &near);
        c->near[b] = (uint8_t)near;
    }
    return -1;
}

/* dgeev alone for c->count matrices in c->a (column-major each, overwritten): eigenvalues into
 * c->wr, c->wi and, with c->vectors, the right vectors of entry b into c->vr + b n n (LAPACK's
 * real layout). Returns -1 on success, else the index of the first failed entry (c->info). */
int64_t flexmodal_eig_only(struct eig_modes_call *c, flexmodal_dgeev solve)
{
    int n = (int)c->n, one = 1, lwork = (int)c->lwork, info = 0;
    char jobvl = 'N', jobvr = c->vectors ? 'V' : 'N';
    double unused = 0.0;
    for (int64_t b = 0; b < c->count; ++b) {
        solve(&jobvl, &jobvr, &n, c->a + b * c->n * c->n, &n, c->wr + b * n, c->wi + b * n, &unused,
              &one, c->vectors ? c->vr + b * c->n * c->n : &unused, c->vectors ? &n : &one, c->work,
              &lwork, &info);
        c->info = info;
        if (info != 0)
            return b;
    }
    return -1;
}
