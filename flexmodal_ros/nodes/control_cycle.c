/* Steady control cycles of the feedforward_pd_controller node in C, with no Python per cycle
 * (flexmodal_ros/nodes/native_cycle.py binds it; the fail-safe policy is
 * flexmodal_ros/control.py's FailSafeController, which decides when a cycle is steady).
 *
 * fm_serve() runs on the node's control thread: it waits on the /joint_states subscription (and a
 * wake-up guard condition), takes the newest serialized sample and, holding the cycle mutex,
 * either runs the cycle here or hands the sample to Python. A cycle runs here only when the state
 * Python armed under the mutex says it is steady, and only if every check below passes:
 *   - the message has the learned byte layout of its sender (same length, same bytes outside
 *     the stamp and the position/velocity values: conversions.py _JointStateLayout);
 *   - its stamp is later than the last accepted sample's;
 *   - every gathered value [q; qd; q_m; qd_m] (after the deflection convention, if any) lies
 *     within the controller's state bounds (false for NaN and inf);
 *   - HOLD: the sample is before the start of an accepted trajectory;
 *     TRACKING: its time from the start lies in the segment loaded into the law;
 *   - the generated law gives a finite result with no joint at its effort limit.
 * Then q_m, qd_m (and the phase s when tracking) go into the law's input, the law runs, the torques
 * are written into the serialized Float64MultiArray and published on the command publisher, and the
 * cycle is recorded for Python to adopt (sample, receipt time, compute time, cycle count, late
 * cycles). Anything else (first sample, new layout, time not advancing, rejects, segment or mode
 * changes, saturation, non-finite results) goes to Python's cycle with the same bytes. Every
 * idle_period, if the last valid sample is older than state_timeout, Python's watchdog runs.
 * All arithmetic repeats the Python path's operations in the same order: the commands are the
 * same to the bit (test/test_controller_nodes.py compares both paths). */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rcl/rcl.h>
#include <rcutils/error_handling.h>
#include <rmw/serialized_message.h>

#define FM_MAX_JOINTS 64
#define FM_SAMPLE_CAPACITY 4096

typedef int (*fm_law)(const double **arg, double **res, long long *iw, double *w, int mem);
typedef int (*fm_sample_callback)(const uint8_t *buffer, int64_t length);
typedef int (*fm_idle_callback)(void);

/* Mirrored by native_cycle.py's _CycleState: 8-byte fields only, then the error text. */
typedef struct {
    /* armed by Python, under the mutex */
    int64_t armed;               /* 0: every sample goes to Python */
    int64_t n;
    int64_t size;                /* length of the sender's serialized JointState */
    int64_t regions[6];          /* [a0, b0, a1, b1, a2, b2): bytes that must equal pattern's */
    const uint8_t *pattern;      /* the sample the layout was learned from */
    int64_t stamp_at;            /* int32 sec, uint32 nanosec */
    int64_t values_at;           /* first float64 of position[] */
    const int64_t *gather;       /* 4n float indices from values_at: q, qd, q_m, qd_m */
    const double *motor_scale;   /* NULL, or W twice (2n): deflection convention */
    const double *lower, *upper; /* 4n state bounds */
    double previous_t;           /* stamp of the last accepted sample [s] */
    int64_t tracking;            /* 0: HOLD, 1: TRACKING */
    double hold_until;           /* HOLD: steady while t < this (trajectory start, or inf) */
    double t0, segment_begin, segment_end;   /* TRACKING: steady while begin <= t - t0 < end */
    fm_law law;
    const double **arg;
    double **res;
    long long *iw;
    double *w;
    int64_t u_tracking, u_s, u_T, u_q_m, u_qd_m, y_tau, y_n_saturated, y_n_nonfinite;
    uint8_t *command;            /* serialized Float64MultiArray */
    int64_t command_length, command_data_at;
    const double *effort_scale;  /* NULL, or n factors applied to the published torques */
    void *publisher;             /* rcl_publisher_t */
    double idle_period, state_timeout;
    double advanced;             /* steady time of the last sample whose stamp advanced [s] */
    int64_t has_sample;
    /* written here, adopted by Python under the mutex */
    int64_t fast_cycles;         /* cycles run here since Python last adopted them */
    int64_t native_total;        /* cycles run here since start */
    double *last_values;         /* 4n: the last sample run here */
    double last_t, last_received;
    double *compute_us;          /* ring of compute times [µs] */
    int64_t compute_capacity, compute_head;
    double period, last_cycle;   /* shared with Python's cycles: late-cycle count */
    int64_t late_cycles;
    int64_t running;
    pthread_mutex_t *mutex;
    char error[256];
} fm_cycle_t;

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
static int steady_cycle(fm_cycle_t *st, const uint8_t *buffer, size_t length, double start)
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
    rcl_serialized_message_t command = rmw_get_zero_initialized_serialized_message();
    command.buffer = st->command;
    command.buffer_length = command.buffer_capacity = (size_t)st->command_length;
    command.allocator = rcl_get_default_allocator();
    if (rcl_publish_serialized_message((rcl_publisher_t *)st->publisher, &command, NULL) != RCL_RET_OK)
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

static void set_error(fm_cycle_t *st, const char *what)
{
    snprintf(st->error, sizeof st->error, "%s: %s", what, rcutils_get_error_string().str);
    rcutils_reset_error();
}

/* Serves until st->running is 0 (0), a callback returns non-zero (1) or rcl fails (-1: st->error). */
int64_t fm_serve(fm_cycle_t *st, void *subscription, void *wake, void *context,
                 fm_sample_callback on_sample, fm_idle_callback on_idle)
{
    rcl_allocator_t allocator = rcl_get_default_allocator();
    rcl_wait_set_t wait_set = rcl_get_zero_initialized_wait_set();
    rcl_serialized_message_t sample = rmw_get_zero_initialized_serialized_message();
    int64_t code = 0;

    if (st->n > FM_MAX_JOINTS) {
        snprintf(st->error, sizeof st->error, "at most %d joints", FM_MAX_JOINTS);
        return -1;
    }
    if (rcl_wait_set_init(&wait_set, 1, 1, 0, 0, 0, 0, (rcl_context_t *)context, allocator) != RCL_RET_OK) {
        set_error(st, "wait set");
        return -1;
    }
    if (rmw_serialized_message_init(&sample, FM_SAMPLE_CAPACITY, &allocator) != RMW_RET_OK) {
        set_error(st, "sample buffer");
        code = -1;
    }
    double next_idle = monotonic_s() + st->idle_period;
    while (!code && st->running) {
        rmw_message_info_t info;
        int taken = 0;
        double left = next_idle - monotonic_s();
        if (rcl_wait_set_clear(&wait_set) != RCL_RET_OK
            || rcl_wait_set_add_subscription(&wait_set, (rcl_subscription_t *)subscription, NULL) != RCL_RET_OK
            || rcl_wait_set_add_guard_condition(&wait_set, (rcl_guard_condition_t *)wake, NULL) != RCL_RET_OK) {
            set_error(st, "wait set");
            code = -1;
            break;
        }
        rcl_ret_t waited = rcl_wait(&wait_set, left > 0.0 ? (int64_t)(left * 1e9) : 0);
        if (waited != RCL_RET_OK && waited != RCL_RET_TIMEOUT) {
            set_error(st, "wait");
            code = -1;
            break;
        }
        while (rcl_take_serialized_message((rcl_subscription_t *)subscription, &sample, &info, NULL) == RCL_RET_OK)
            taken = 1;                                   /* the newest queued sample */
        rcutils_reset_error();                           /* "take failed": nothing (more) queued */
        pthread_mutex_lock(st->mutex);
        if (taken && st->running) {
            int done = st->armed ? steady_cycle(st, sample.buffer, sample.buffer_length, monotonic_s()) : 0;
            if (done < 0) {
                set_error(st, "publish");
                code = -1;
            } else if (!done && on_sample(sample.buffer, (int64_t)sample.buffer_length)) {
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
    if (rcl_wait_set_fini(&wait_set) != RCL_RET_OK && !code) {
        set_error(st, "wait set");
        code = -1;
    }
    if (sample.buffer && rmw_serialized_message_fini(&sample) != RMW_RET_OK && !code) {
        set_error(st, "sample buffer");
        code = -1;
    }
    return code;
}
