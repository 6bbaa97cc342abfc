/* Interface of lapack_batch.c (see there), shared with the Cython extension lapack_kernel.pyx. */
#ifndef FLEXMODAL_LAPACK_BATCH_H
#define FLEXMODAL_LAPACK_BATCH_H

#include <stdint.h>

#define FLEXMODAL_EIG_MAX_ORDER 4096

/* LAPACK dgeev, Fortran calling convention with 32-bit integers: the signature of
 * scipy.linalg.cython_lapack.dgeev. */
typedef void (*flexmodal_dgeev)(char *jobvl, char *jobvr, int *n, double *a, int *lda, double *wr,
                                double *wi, double *vl, int *ldvl, double *vr, int *ldvr,
                                double *work, int *lwork, int *info);

/* Arguments of flexmodal_eig_modes / flexmodal_eig_only (filled once by the extension). */
struct eig_modes_call {
    int64_t vectors;         /* 1: right vectors and mode shapes; 0: eigenvalues only */
    int64_t count, n;        /* count matrices of order n */
    double *a;               /* count x n x n, column-major each; overwritten */
    double *wr, *wi;         /* count x n eigenvalues */
    double *vr;              /* eig_modes: n x n scratch for one entry; eig_only: count x n x n */
    double *work;
    int64_t lwork;
    int64_t rows;            /* shape rows kept: the first `rows` vector rows */
    double rtol;             /* STABILITY_RTOL */
    int64_t *modes;          /* count: modes per entry */
    double *freq, *zeta;     /* count x h (h = n / 2) */
    double *lam;             /* count x h complex (re, im) */
    double *shapes;          /* count x rows x h complex; unused without vectors */
    double *real;            /* count x n: the real eigenvalues first, ascending */
    int64_t *nreal;          /* count */
    uint8_t *near;           /* count: 1 where the stability needs the exact check */
    const double *tpl, *rhs; /* state-matrix assembly (NULL: `a` holds the matrices) */
    const double *minv, *kg; /* count x q x q each (q = n / 4) */
    int64_t info;            /* LAPACK info of the failed entry */
};

/* dgeev, then the modes, for the c->count matrices in c->a; with c->minv not NULL, matrix b is
 * first assembled there as the flexible-joint state matrix (2.14). Returns -1 on success, else the
 * index of the first entry LAPACK failed on (its info in c->info), or -2 if n > MAX_ORDER. */
int64_t flexmodal_eig_modes(struct eig_modes_call *c, flexmodal_dgeev solve);

/* dgeev only (no modes) for the c->count matrices in c->a. Returns as flexmodal_eig_modes. */
int64_t flexmodal_eig_only(struct eig_modes_call *c, flexmodal_dgeev solve);

#endif
