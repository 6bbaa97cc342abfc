/* The limit of a 1 kHz control cycle on this machine (benchmarks/bench_controller_ros.py): the
 * per-sample work of the feedforward_pd_controller node done in C on rcl, with no Python per cycle.
 * Built at install time as libflexmodal_bare_cycle.so of the flexmodal_native package; the reader
 * and writer are the native cycle's (endpoint.h: an rcl context and node of their own).
 * Wait on the joint states, take the newest serialized sample, parse its CDR
 * (positions, velocities; links then motors), write q_m, qd_m into the generated control law's
 * input, run the law, serialize the motor torques as a std_msgs/Float64MultiArray and publish it
 * through the same rmw as the node. Records per cycle [µs]: taken -> command serialized,
 * taken -> command handed to rmw (what the node's compute_us measures), and the cycle's start on
 * CLOCK_MONOTONIC (late cycles: more than 1.5 periods after the previous one, as the node counts). Not part of the product:
 * no fail-safe policy, no checks beyond the parse and finiteness of the sample. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "endpoint.h"

typedef int (*law_function)(const double **arg, double **res, long long *iw, double *w, int mem);

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static size_t aligned(size_t offset, size_t alignment) { return (offset + alignment - 1) & ~(alignment - 1); }

/* Positions and velocities of a serialized sensor_msgs/JointState (little-endian CDR, offsets after
 * the 4-byte encapsulation); their count, or -1 if the buffer is short or a value is not finite. */
static int parse_joint_state(const uint8_t *buffer, size_t length, double *pos, double *vel, int max)
{
    const uint8_t *b = buffer + 4;
    size_t size = length - 4, o = 8, count;                 /* after the stamp */
    uint32_t word, names, values;
#define READ_U32(x) do { o = aligned(o, 4); if (o + 4 > size) return -1; memcpy(&(x), b + o, 4); o += 4; } while (0)
    READ_U32(word);                                         /* frame_id */
    o += word;
    READ_U32(names);
    for (count = 0; count < names; count++) {
        READ_U32(word);
        o += word;
    }
    READ_U32(values);
    if ((int)values > max)
        return -1;
    o = aligned(o, 8);
    if (o + 8 * values > size)
        return -1;
    memcpy(pos, b + o, 8 * values);
    o += 8 * values;
    READ_U32(word);
    if (word != values)
        return -1;
    o = aligned(o, 8);
    if (o + 8 * values > size)
        return -1;
    memcpy(vel, b + o, 8 * values);
    for (count = 0; count < values; count++)
        if (!(pos[count] - pos[count] == 0.0) || !(vel[count] - vel[count] == 0.0))
            return -1;
    return (int)values;
#undef READ_U32
}

/* The reader (best effort, depth 1, as the node's) and writer (reliable, depth 10) on the fully
 * resolved topics; NULL with the reason in error. */
fm_endpoint_t *bare_open(const char *node_name, const char *states_topic, const char *command_topic, char *error,
                         int64_t error_size)
{
    fm_qos_t states = {1, 1}, commands = {10, 0};
    return fm_endpoint_open(node_name, "/", states_topic, states, command_topic, commands, error, error_size);
}

const char *bare_error(fm_endpoint_t *endpoint) { return endpoint->error; }
void bare_close(fm_endpoint_t *endpoint) { fm_endpoint_close(endpoint); }

/* Runs `cycles` cycles; returns the number run, or a negative code: -3 wait (bare_error),
 * -4 sample not parsed (or not 2n values), -5 publish (bare_error), -6 more than 64 joints. */
int run_cycles(fm_endpoint_t *endpoint, int cycles, double *times, law_function law, const double **arg,
               double **res, long long *iw, double *w, int n, int q_m_offset, int qd_m_offset, int tau_offset)
{
    uint8_t command_buffer[20 + 8 * 64];
    double pos[128], vel[128];
    int done = 0;

    if (n > 64)
        return -6;
    while (done < cycles) {
        int taken = fm_endpoint_wait_take(endpoint, RCL_MS_TO_NS(200));
        if (taken < 0)
            return -3;
        if (!taken)
            continue;
        const rcl_serialized_message_t *sample = &endpoint->sample;
        double start = now_us();
        if (parse_joint_state(sample->buffer, sample->buffer_length, pos, vel, 128) != 2 * n)
            return -4;
        double *u = (double *)arg[0];
        memcpy(u + q_m_offset, pos + n, 8 * n);              /* motor joints follow the links */
        memcpy(u + qd_m_offset, vel + n, 8 * n);
        law(arg, res, iw, w, 0);
        uint32_t count = (uint32_t)n;    /* layout.dim = [] and data_offset = 0 (zeros), data: count, values */
        memset(command_buffer, 0, 20);
        command_buffer[1] = 1;                                /* CDR little endian */
        memcpy(command_buffer + 12, &count, 4);
        memcpy(command_buffer + 20, res[0] + tau_offset, 8 * n);   /* 8-aligned after the header: 16 */
        double serialized = now_us();
        if (fm_endpoint_publish(endpoint, command_buffer, 20 + 8 * (size_t)n) != 0)
            return -5;
        times[3 * done] = serialized - start;
        times[3 * done + 1] = now_us() - start;
        times[3 * done + 2] = start;
        done++;
    }
    return done;
}
