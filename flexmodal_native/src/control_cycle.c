/* Steady control cycles of the feedforward_pd_controller node in C, with no Python per cycle
 * (flexmodal_ros/nodes/native_cycle.py binds it; the fail-safe policy is
 * flexmodal_ros/control/law.py's FailSafeController, which decides when a cycle is steady).
 * Built at install time (make setup, colcon build) as libflexmodal_control_cycle.so of the
 * flexmodal_native package.
 *
 * fm_open() creates the joint-state reader and the command writer on an rcl context and node of
 * their own (endpoint.h). fm_serve() runs on the node's control thread: it waits on the joint
 * states (and a wake-up guard condition), takes the newest serialized sample and, holding the cycle
 * mutex, either runs the cycle here or hands the sample to Python. Python's cycles publish their
 * commands through the same writer (fm_publish): one writer, in cycle order. A cycle runs here only
 * when the state Python armed under the mutex says it is steady, and only if every check below
 * passes:
 *   - the message has the learned byte layout of its sender (same length, same bytes outside
 *     the stamp and the position/velocity values: conversions.py _JointStateLayout);
 *   - its stamp is later than the last accepted sample's;
 *   - every gathered value [q; qd; q_m; qd_m] (after the deflection convention, if any) lies
 *     within the controller's state bounds (false for NaN and inf);
 *   - HOLD: the sample is before the start of an accepted trajectory;
 *     TRACKING: its time from the start lies in the segment loaded into the law;
 *   - the generated law gives a finite result with no joint at its effort limit.
 * Then q_m, qd_m (and the phase s when tracking) go into the law's input, the law runs, the torques
 * are written into the serialized Float64MultiArray and published, and the cycle is recorded for
 * Python to adopt (sample, receipt time, compute time, cycle count, late cycles). Anything else
 * (first sample, new layout, time not advancing, rejects, segment or mode changes, saturation,
 * non-finite results) goes to Python's cycle with the same bytes. Every idle_period, if the last
 * valid sample is older than state_timeout, Python's watchdog runs. All arithmetic repeats the
 * Python path's operations in the same order: the commands are the same to the bit
 * (test/test_controller_nodes.py compares both paths). */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stddef.h>

#include "endpoint.h"

#define FM_MAX_JOINTS 64

typedef int (*fm_law)(const double **arg, double **res, long long *iw, double *w, int mem);
typedef int (*fm_sample_callback)(const uint8_t *buffer, int64_t length);
typedef int (*fm_idle_callback)(void);

/* The cycle state, shared with native_cycle.py's _CycleState (ctypes): declared once here as a
 * field list, which gives both the struct and the table of field names, offsets and sizes that
 * native_cycle.py checks its mirror against, field by field, before it uses the library. */
#define FM_CYCLE_FIELDS(F)                                                                                   \
    /* armed by Python, under the mutex */                                                               \
    F(int64_t, armed, )                 /* 0: every sample goes to Python */                            \
    F(int64_t, n, )                                                                                      \
    F(int64_t, size, )                  /* length of the sender's serialized JointState */              \
    F(int64_t, regions, [6])            /* [a0, b0, a1, b1, a2, b2): bytes that must equal pattern's */ \
    F(const uint8_t *, pattern, )       /* the sample the layout was learned from */                    \
    F(int64_t, stamp_at, )              /* int32 sec, uint32 nanosec */                                 \
    F(int64_t, values_at, )             /* first float64 of position[] */                               \
    F(const int64_t *, gather, )        /* 4n float indices from values_at: q, qd, q_m, qd_m */         \
    F(const double *, motor_scale, )    /* NULL, or W twice (2n): deflection convention */              \
    F(const double *, lower, )          /* 4n state bounds */                                           \
    F(const double *, upper, )                                                                           \
    F(double, previous_t, )             /* stamp of the last accepted sample [s] */                     \
    F(int64_t, tracking, )              /* 0: HOLD, 1: TRACKING */                                      \
    F(double, hold_until, )             /* HOLD: steady while t < this (trajectory start, or inf) */    \
    F(double, t0, )                     /* TRACKING: steady while begin <= t - t0 < end */              \
    F(double, segment_begin, )                                                                           \
    F(double, segment_end, )                                                                             \
    F(fm_law, law, )                                                                                     \
    F(const double **, arg, )                                                                            \
    F(double **, res, )                                                                                  \
    F(long long *, iw, )                                                                                 \
    F(double *, w, )                                                                                     \
    F(int64_t, u_tracking, )            /* offsets of the law's inputs and outputs [doubles] */         \
    F(int64_t, u_s, )                                                                                    \
    F(int64_t, u_T, )                                                                                    \
    F(int64_t, u_q_m, )                                                                                  \
    F(int64_t, u_qd_m, )                                                                                 \
    F(int64_t, y_tau, )                                                                                  \
    F(int64_t, y_n_saturated, )                                                                          \
    F(int64_t, y_n_nonfinite, )                                                                          \
    F(uint8_t *, command, )             /* serialized Float64MultiArray */                              \
    F(int64_t, command_length, )                                                                         \
    F(int64_t, command_data_at, )                                                                        \
    F(const double *, effort_scale, )   /* NULL, or n factors applied to the published torques */       \
    F(double, idle_period, )                                                                             \
    F(double, state_timeout, )                                                                           \
    F(double, advanced, )               /* steady time of the last sample whose stamp advanced [s] */   \
    F(int64_t, has_sample, )                                                                             \
    /* written here, adopted by Python under the mutex */                                                \
    F(int64_t, fast_cycles, )           /* cycles run here since Python last adopted them */            \
    F(int64_t, native_total, )          /* cycles run here since start */                               \
    F(double *, last_values, )          /* 4n: the last sample run here */                              \
    F(double, last_t, )                                                                                  \
    F(double, last_received, )                                                                           \
    F(double *, compute_us, )           /* ring of compute times [us] */                                \
    F(int64_t, compute_capacity, )                                                                       \
    F(int64_t, compute_head, )                                                                           \
    F(double, period, )                 /* shared with Python's cycles: late-cycle count */             \
    F(double, last_cycle, )                                                                              \
    F(int64_t, late_cycles, )                                                                            \
    F(int64_t, running, )                                                                                \
    F(pthread_mutex_t *, mutex, )                                                                        \
    F(char, error, [256])

#define FM_DECLARE(type, name, dims) type name dims;
typedef struct {
    FM_CYCLE_FIELDS(FM_DECLARE)
} fm_cycle_t;

typedef struct {
    const char *name;
    int64_t offset, size;
} fm_field_t;

#define FM_ENTRY(type, name, dims) {#name, (int64_t)offsetof(fm_cycle_t, name), (int64_t)sizeof(((fm_cycle_t *)0)->name)},
static const fm_field_t fm_fields[] = {FM_CYCLE_FIELDS(FM_ENTRY) {NULL, 0, 0}};

/* The field table (ends with a NULL name) and the struct's size. */
const fm_field_t *fm_state_fields(void) { return fm_fields; }
int64_t fm_state_size(void) { return (int64_t)sizeof(fm_cycle_t); }

static double monotonic_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void *fm_mutex_new(void)
{
    pthread_mutex_t *m = malloc(sizeof *m);
    if (m && pthread_mutex_init(m, NULL) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

void fm_mutex_free(void *m)
{
    pthread_mutex_destroy(m);
    free(m);
}

void fm_lock(void *m) { pthread_mutex_lock(m); }
void fm_unlock(void *m) { pthread_mutex_unlock(m); }

/* 1: the sample passed every check and its command is published; 0: Python's cycle must run it;
 * -1: rmw refused the command. */
static int steady_cycle(fm_cycle_t *st, fm_endpoint_t *endpoint, const uint8_t *buffer, size_t length,
                        double start)
{
    const int64_t n = st->n;
    double values[4 * FM_MAX_JOINTS];
    int32_t sec;
    uint32_t nanosec;

    if ((int64_t)length != st->size)
        return 0;
    for (int k = 0; k < 6; k += 2)
        if (memcmp(buffer + st->regions[k], st->pattern + st->regions[k], st->regions[k + 1] - st->regions[k]))
            return 0;
    memcpy(&sec, buffer + st->stamp_at, 4);
    memcpy(&nanosec, buffer + st->stamp_at + 4, 4);
    const double t = (double)sec + 1e-9 * (double)nanosec;
    if (!(t > st->previous_t))
        return 0;
    for (int64_t k = 0; k < 4 * n; k++)
        memcpy(values + k, buffer + st->values_at + 8 * st->gather[k], 8);
    if (st->motor_scale) {                       /* convention.py to_model_inplace */
        for (int64_t k = 0; k < 2 * n; k++)
            values[k] += values[2 * n + k];
        for (int64_t k = 0; k < 2 * n; k++)
            values[2 * n + k] *= st->motor_scale[k];
    }
    for (int64_t k = 0; k < 4 * n; k++)
        if (!(values[k] >= st->lower[k] && values[k] <= st->upper[k]))
            return 0;
    double *u = (double *)st->arg[0], *y = st->res[0];
    double phase = 0.0;
    if (st->tracking) {
        const double from_start = t - st->t0;
        if (!(st->segment_begin <= from_start && from_start < st->segment_end))
            return 0;
        phase = (from_start - st->segment_begin) / u[st->u_T];
    } else if (!(t < st->hold_until)) {
        return 0;
    }
    u[st->u_tracking] = (double)st->tracking;
    if (st->tracking)
        u[st->u_s] = phase;
    memcpy(u + st->u_q_m, values + 2 * n, 8 * n);
    memcpy(u + st->u_qd_m, values + 3 * n, 8 * n);
    st->law(st->arg, st->res, st->iw, st->w, 0);
    if (y[st->y_n_nonfinite] != 0.0 || y[st->y_n_saturated] != 0.0)
        return 0;
    double *data = (double *)(st->command + st->command_data_at);   /* 8-aligned in the buffer */
    for (int64_t k = 0; k < n; k++)
        data[k] = st->effort_scale ? y[st->y_tau + k] * st->effort_scale[k] : y[st->y_tau + k];
    if (fm_endpoint_publish(endpoint, st->command, (size_t)st->command_length) != 0)
        return -1;
    const double end = monotonic_s();
    memcpy(st->last_values, values, 8 * 4 * n);
    st->last_t = st->previous_t = t;
    st->last_received = st->advanced = start;
    st->fast_cycles++;
    st->native_total++;
    st->compute_us[st->compute_head % st->compute_capacity] = 1e6 * (end - start);
    st->compute_head++;
    if (st->last_cycle >= 0.0 && start - st->last_cycle > 1.5 * st->period)
        st->late_cycles++;
    st->last_cycle = start;
    return 1;
}

/* The reader and writer (endpoint.h) on the fully resolved topics; NULL with the reason in error. */
fm_endpoint_t *fm_open(const char *node_name, const char *node_namespace, const char *states_topic,
                       int64_t states_depth, int64_t states_best_effort, const char *command_topic,
                       int64_t command_depth, int64_t command_best_effort, char *error, int64_t error_size)
{
    fm_qos_t states = {states_depth, states_best_effort}, commands = {command_depth, command_best_effort};
    return fm_endpoint_open(node_name, node_namespace, states_topic, states, command_topic, commands, error,
                            error_size);
}

/* Python's commands (held mutex: in cycle order with the ones published here). 0, or -1 (fm_error). */
int64_t fm_publish(fm_endpoint_t *endpoint, const uint8_t *buffer, int64_t length)
{
    return fm_endpoint_publish(endpoint, buffer, (size_t)length);
}

const char *fm_error(fm_endpoint_t *endpoint) { return endpoint->error; }
void fm_wake(fm_endpoint_t *endpoint) { fm_endpoint_wake(endpoint); }
int64_t fm_matched(fm_endpoint_t *endpoint, int64_t *state_publishers, int64_t *command_subscribers)
{
    return fm_endpoint_matched(endpoint, state_publishers, command_subscribers);
}
void fm_close(fm_endpoint_t *endpoint) { fm_endpoint_close(endpoint); }

/* Serves until st->running is 0 (0), a callback returns non-zero (1) or rcl fails (-1: st->error). */
int64_t fm_serve(fm_cycle_t *st, fm_endpoint_t *endpoint, fm_sample_callback on_sample, fm_idle_callback on_idle)
{
    int64_t code = 0;

    if (st->n > FM_MAX_JOINTS) {
        snprintf(st->error, sizeof st->error, "at most %d joints", FM_MAX_JOINTS);
        return -1;
    }
    double next_idle = monotonic_s() + st->idle_period;
    while (!code && st->running) {
        double left = next_idle - monotonic_s();
        int taken = fm_endpoint_wait_take(endpoint, left > 0.0 ? (int64_t)(left * 1e9) : 0);
        if (taken < 0) {
            snprintf(st->error, sizeof st->error, "%s", endpoint->error);
            code = -1;
            break;
        }
        pthread_mutex_lock(st->mutex);
        if (taken && st->running) {
            const rcl_serialized_message_t *sample = &endpoint->sample;
            int done = st->armed ? steady_cycle(st, endpoint, sample->buffer, sample->buffer_length, monotonic_s()) : 0;
            if (done < 0) {
                snprintf(st->error, sizeof st->error, "%s", endpoint->error);
                code = -1;
            } else if (!done && on_sample(sample->buffer, (int64_t)sample->buffer_length)) {
                code = 1;
            }
        }
        double now = monotonic_s();
        if (!code && st->running && now >= next_idle) {
            if (st->has_sample && now - st->advanced > st->state_timeout && on_idle())
                code = 1;
            next_idle += st->idle_period;
            if (next_idle <= now)                        /* behind: no burst of catch-ups */
                next_idle = now + st->idle_period;
        }
        pthread_mutex_unlock(st->mutex);
    }
    return code;
}
