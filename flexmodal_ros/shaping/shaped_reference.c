/* The shaped reference y(t) = sum_i A_i(t) q(t - tau_i(t)) and its time derivatives 1..4 at many
 * times, for flexmodal_ros.shaping.reference.ShapedTrajectory.evaluate (module docstring there:
 * Faa di Bruno for q(u_i(t)), Leibniz for the products with A_i(t)). The same arithmetic as the
 * NumPy version there (its reference and fallback), one (time, impulse) pair at a time instead of
 * ~30 array passes over all pairs; it builds the controller's piecewise polynomial at ~1000
 * knots x ~30 impulses. */
#include <stdint.h>

/* Adds the sums of one segment's impulses to out (5 x n): wsum_j (q_b - q_a) + asum_j q_a, q_a and
 * q_b the segment's waypoints; clears the sums. Nothing for segment -1 (none yet). */
static void flush(int64_t seg, int64_t n, const double *pos, double *wsum, double *asum, double *o)
{
    if (seg >= 0) {
        const double *p0 = pos + seg * n, *p1 = pos + (seg + 1) * n;
        for (int j = 0; j < 5; ++j)
            for (int64_t x = 0; x < n; ++x)
                o[j * n + x] += wsum[j] * (p1[x] - p0[x]) + asum[j] * p0[x];
    }
    for (int j = 0; j < 5; ++j)
        wsum[j] = asum[j] = 0.0;
}

/* Derivatives 0..4 with respect to t of f(g(t)) (Faa di Bruno; reference.compose) from f and its
 * derivatives f[0..4] (stride `stride`) at g(t) and g's derivatives g[1..4]. */
static void compose(const double *f, int64_t stride, const double *g, double *out)
{
    const double f0 = f[0], f1 = f[stride], f2 = f[2 * stride], f3 = f[3 * stride], f4 = f[4 * stride];
    const double g1 = g[1], g2 = g[2], g3 = g[3], g4 = g[4];
    out[0] = f0;
    out[1] = f1 * g1;
    out[2] = f2 * g1 * g1 + f1 * g2;
    out[3] = f3 * g1 * g1 * g1 + 3.0 * f2 * g1 * g2 + f1 * g3;
    out[4] = f4 * g1 * g1 * g1 * g1 + 6.0 * f3 * g1 * g1 * g2 + f2 * (3.0 * g2 * g2 + 4.0 * g1 * g3)
             + f1 * g4;
}

/* m times t with the path parameter's derivatives p (m x 5); Ap, taup (m x 5 x N): the impulse
 * amplitudes and delays with their derivatives 0..4 with respect to the path parameter; the
 * path: S + 1 waypoint times, positions (S + 1) x n, eta_coef (5 x 10) the coefficients of
 * d^j eta / ds^j in ascending powers of s (trajectory.ETA_ASCENDING). Writes out (m x 5 x n). */
void flexmodal_shaped_reference(int64_t m, int64_t N, int64_t n, int64_t S, const double *t,
                                const double *p, const double *Ap, const double *taup,
                                const double *times, const double *pos, const double *eta_coef,
                                double *out)
{
    static const double binom[5][5] = {{1, 0, 0, 0, 0}, {1, 1, 0, 0, 0}, {1, 2, 1, 0, 0},
                                       {1, 3, 3, 1, 0}, {1, 4, 6, 4, 1}};
    for (int64_t k = 0; k < m; ++k) {
        double *o = out + k * 5 * n;
        for (int64_t x = 0; x < 5 * n; ++x)
            o[x] = 0.0;
        double wsum[5] = {0}, asum[5] = {0};    /* sums over consecutive impulses on one segment */
        int64_t current = -1;
        for (int64_t i = 0; i <= N; ++i) {
            if (i == N) {
                flush(current, n, pos, wsum, asum, o);
                break;
            }
            double a[5], d[5];                   /* A_i and tau_i with their time derivatives */
            compose(Ap + k * 5 * N + i, N, p + k * 5, a);
            compose(taup + k * 5 * N + i, N, p + k * 5, d);
            const double u0 = t[k] - d[0], u1 = 1.0 - d[1], u2 = -d[2], u3 = -d[3], u4 = -d[4];
            int64_t lo = 0, hi = S + 1;                  /* first waypoint time > u0 */
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (times[mid] <= u0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int64_t seg = lo - 1;
            seg = seg < 0 ? 0 : (seg > S - 1 ? S - 1 : seg);
            const double T = times[seg + 1] - times[seg];
            double s = (u0 - times[seg]) / T;
            s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
            double e[5], power = 1.0, scale = 1.0;
            for (int j = 0; j < 5; ++j)
                e[j] = 0.0;
            for (int p = 0; p < 10; ++p) {
                for (int j = 0; j < 5; ++j)
                    e[j] += eta_coef[j * 10 + p] * power;
                power *= s;
            }
            const int resting = u0 <= times[0] || u0 >= times[S];
            for (int j = 1; j < 5; ++j) {
                scale /= T;
                e[j] = resting ? 0.0 : e[j] * scale;
            }
            const double c[5] = {
                e[0],
                e[1] * u1,
                e[2] * u1 * u1 + e[1] * u2,
                e[3] * u1 * u1 * u1 + 3.0 * e[2] * u1 * u2 + e[1] * u3,
                e[4] * u1 * u1 * u1 * u1 + 6.0 * e[3] * u1 * u1 * u2
                    + e[2] * (3.0 * u2 * u2 + 4.0 * u1 * u3) + e[1] * u4};
            double w[5];
            for (int j = 0; j < 5; ++j) {
                w[j] = 0.0;
                for (int l = 0; l <= j; ++l)
                    w[j] += binom[j][l] * a[l] * c[j - l];
            }
            if (seg != current) {
                flush(current, n, pos, wsum, asum, o);
                current = seg;
            }
            for (int j = 0; j < 5; ++j) {
                wsum[j] += w[j];
                asum[j] += a[j];
            }
        }
    }
}
