/* The limit of a 1 kHz control cycle on this machine (benchmarks/bench_controller_ros.py): the
 * per-sample work of the feedforward_pd_controller node done in C on rcl, with no Python per cycle.
 * Wait on the /joint_states subscription, take the newest serialized sample, parse its CDR
 * (positions, velocities; links then motors), write q_m, qd_m into the generated control law's
 * input, run the law, serialize the motor torques as a std_msgs/Float64MultiArray and publish it
 * through the same rmw as the node. Records per cycle [µs]: taken -> command serialized,
 * taken -> command handed to rmw (what the node's compute_us measures), and the cycle's start on
 * CLOCK_MONOTONIC (late cycles: more than 1.5 periods after the previous one, as the node counts). Not part of the product:
 * no fail-safe policy, no checks beyond the parse and finiteness of the sample. */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <rcl/rcl.h>
#include <rmw/serialized_message.h>

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

/* Runs `cycles` cycles; returns the number run, or a negative code: -1 wait set, -2 buffer, -3 wait,
 * -4 sample not parsed (or not 2n values), -5 publish. */
int run_cycles(uintptr_t subscription, uintptr_t publisher, uintptr_t context, int cycles, double *times,
               law_function law, const double **arg, double **res, long long *iw, double *w,
               int n, int q_m_offset, int qd_m_offset, int tau_offset)
{
    rcl_allocator_t allocator = rcl_get_default_allocator();
    rcl_wait_set_t wait_set = rcl_get_zero_initialized_wait_set();
    rcl_serialized_message_t sample = rmw_get_zero_initialized_serialized_message();
    rcl_serialized_message_t command = rmw_get_zero_initialized_serialized_message();
    uint8_t command_buffer[20 + 8 * 64];
    double pos[128], vel[128];
    int done = 0, code = 0;

    if (n > 64 || rcl_wait_set_init(&wait_set, 1, 0, 0, 0, 0, 0, (rcl_context_t *)context, allocator) != RCL_RET_OK)
        return -1;
    if (rmw_serialized_message_init(&sample, 4096, &allocator) != RMW_RET_OK)
        code = -2;
    command.buffer = command_buffer;
    command.buffer_capacity = sizeof command_buffer;
    command.allocator = allocator;
    while (!code && done < cycles) {
        rmw_message_info_t info;
        int taken = 0;
        if (rcl_wait_set_clear(&wait_set) != RCL_RET_OK
            || rcl_wait_set_add_subscription(&wait_set, (rcl_subscription_t *)subscription, NULL) != RCL_RET_OK) {
            code = -3;
            break;
        }
        rcl_ret_t waited = rcl_wait(&wait_set, RCL_MS_TO_NS(200));
        if (waited == RCL_RET_TIMEOUT)
            continue;
        if (waited != RCL_RET_OK) {
            code = -3;
            break;
        }
        while (rcl_take_serialized_message((rcl_subscription_t *)subscription, &sample, &info, NULL) == RCL_RET_OK)
            taken = 1;                                      /* the newest queued sample */
        if (!taken)
            continue;
        double start = now_us();
        if (parse_joint_state(sample.buffer, sample.buffer_length, pos, vel, 128) != 2 * n) {
            code = -4;
            break;
        }
        double *u = (double *)arg[0];
        memcpy(u + q_m_offset, pos + n, 8 * n);              /* motor joints follow the links */
        memcpy(u + qd_m_offset, vel + n, 8 * n);
        law(arg, res, iw, w, 0);
        uint32_t count = (uint32_t)n;    /* layout.dim = [] and data_offset = 0 (zeros), data: count, values */
        memset(command_buffer, 0, 20);
        command_buffer[1] = 1;                                /* CDR little endian */
        memcpy(command_buffer + 12, &count, 4);
        memcpy(command_buffer + 20, res[0] + tau_offset, 8 * n);   /* 8-aligned after the header: 16 */
        command.buffer_length = 20 + 8 * n;
        double serialized = now_us();
        if (rcl_publish_serialized_message((rcl_publisher_t *)publisher, &command, NULL) != RCL_RET_OK) {
            code = -5;
            break;
        }
        times[3 * done] = serialized - start;
        times[3 * done + 1] = now_us() - start;
        times[3 * done + 2] = start;
        done++;
    }
    if (rcl_wait_set_fini(&wait_set) != RCL_RET_OK && !code)
        code = -1;
    if (sample.buffer && rmw_serialized_message_fini(&sample) != RMW_RET_OK && !code)
        code = -2;
    return code ? code : done;
}
