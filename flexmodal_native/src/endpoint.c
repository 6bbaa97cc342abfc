/* See endpoint.h. */
#include "endpoint.h"

#include <stdio.h>
#include <stdlib.h>

#include <rcutils/error_handling.h>
#include <rosidl_runtime_c/message_type_support_struct.h>
#include <sensor_msgs/msg/joint_state.h>
#include <std_msgs/msg/float64_multi_array.h>

#define FM_SAMPLE_CAPACITY 4096
/* A teardown step whose failure cannot be acted upon (its error text is reset at the end). */
#define FM_TEARDOWN(call) do { if ((call) != RCL_RET_OK) {} } while (0)

static void set_error(char *error, int64_t size, const char *what)
{
    snprintf(error, (size_t)size, "%s: %s", what, rcutils_get_error_string().str);
    rcutils_reset_error();
}

static rmw_qos_profile_t qos_of(fm_qos_t side)
{
    rmw_qos_profile_t qos = rmw_qos_profile_default;            /* keep last, volatile */
    qos.depth = (size_t)side.depth;
    qos.reliability = side.best_effort ? RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT : RMW_QOS_POLICY_RELIABILITY_RELIABLE;
    return qos;
}

/* Every member initialized (zero) or created in order; `stage` counts the created ones for close. */
typedef enum { FM_NONE, FM_CONTEXT, FM_NODE, FM_STATES, FM_COMMANDS, FM_WAKE, FM_WAIT_SET, FM_SAMPLE } fm_stage_t;

typedef struct {
    fm_endpoint_t public_part;
    fm_stage_t stage;
} fm_endpoint_impl_t;

static void close_stages(fm_endpoint_impl_t *impl)
{
    fm_endpoint_t *e = &impl->public_part;
    /* Teardown failures are not reported: nothing can be done about them at this point. */
    if (impl->stage >= FM_SAMPLE)
        FM_TEARDOWN(rmw_serialized_message_fini(&e->sample));
    if (impl->stage >= FM_WAIT_SET)
        FM_TEARDOWN(rcl_wait_set_fini(&e->wait_set));
    if (impl->stage >= FM_WAKE)
        FM_TEARDOWN(rcl_guard_condition_fini(&e->wake));
    if (impl->stage >= FM_COMMANDS)
        FM_TEARDOWN(rcl_publisher_fini(&e->commands, &e->node));
    if (impl->stage >= FM_STATES)
        FM_TEARDOWN(rcl_subscription_fini(&e->states, &e->node));
    if (impl->stage >= FM_NODE)
        FM_TEARDOWN(rcl_node_fini(&e->node));
    if (impl->stage >= FM_CONTEXT) {
        FM_TEARDOWN(rcl_shutdown(&e->context));
        FM_TEARDOWN(rcl_context_fini(&e->context));
    }
    rcutils_reset_error();
    impl->stage = FM_NONE;
}

fm_endpoint_t *fm_endpoint_open(const char *node_name, const char *node_namespace, const char *states_topic,
                                fm_qos_t states_qos, const char *command_topic, fm_qos_t command_qos,
                                char *error, int64_t error_size)
{
    rcl_allocator_t allocator = rcl_get_default_allocator();
    fm_endpoint_impl_t *impl = calloc(1, sizeof *impl);
    if (!impl) {
        snprintf(error, (size_t)error_size, "out of memory");
        return NULL;
    }
    fm_endpoint_t *e = &impl->public_part;
    e->context = rcl_get_zero_initialized_context();
    e->node = rcl_get_zero_initialized_node();
    e->states = rcl_get_zero_initialized_subscription();
    e->commands = rcl_get_zero_initialized_publisher();
    e->wake = rcl_get_zero_initialized_guard_condition();
    e->wait_set = rcl_get_zero_initialized_wait_set();
    e->sample = rmw_get_zero_initialized_serialized_message();

    rcl_init_options_t init_options = rcl_get_zero_initialized_init_options();
    if (rcl_init_options_init(&init_options, allocator) != RCL_RET_OK) {
        set_error(error, error_size, "init options");
        goto fail;
    }
    rcl_ret_t ret = rcl_init(0, NULL, &init_options, &e->context);
    FM_TEARDOWN(rcl_init_options_fini(&init_options));
    if (ret != RCL_RET_OK) {
        set_error(error, error_size, "rcl_init");
        goto fail;
    }
    impl->stage = FM_CONTEXT;
    rcl_node_options_t node_options = rcl_node_get_default_options();
    node_options.use_global_arguments = false;
    node_options.enable_rosout = false;
    if (rcl_parse_arguments(0, NULL, allocator, &node_options.arguments) != RCL_RET_OK) {   /* none */
        set_error(error, error_size, "node arguments");
        goto fail;
    }
    ret = rcl_node_init(&e->node, node_name, node_namespace, &e->context, &node_options);
    FM_TEARDOWN(rcl_node_options_fini(&node_options));
    if (ret != RCL_RET_OK) {
        set_error(error, error_size, "node");
        goto fail;
    }
    impl->stage = FM_NODE;
    rcl_subscription_options_t subscription_options = rcl_subscription_get_default_options();
    subscription_options.qos = qos_of(states_qos);
    if (rcl_subscription_init(&e->states, &e->node, ROSIDL_GET_MSG_TYPE_SUPPORT(sensor_msgs, msg, JointState),
                              states_topic, &subscription_options) != RCL_RET_OK) {
        set_error(error, error_size, states_topic);
        goto fail;
    }
    impl->stage = FM_STATES;
    rcl_publisher_options_t publisher_options = rcl_publisher_get_default_options();
    publisher_options.qos = qos_of(command_qos);
    if (rcl_publisher_init(&e->commands, &e->node, ROSIDL_GET_MSG_TYPE_SUPPORT(std_msgs, msg, Float64MultiArray),
                           command_topic, &publisher_options) != RCL_RET_OK) {
        set_error(error, error_size, command_topic);
        goto fail;
    }
    impl->stage = FM_COMMANDS;
    if (rcl_guard_condition_init(&e->wake, &e->context, rcl_guard_condition_get_default_options()) != RCL_RET_OK) {
        set_error(error, error_size, "guard condition");
        goto fail;
    }
    impl->stage = FM_WAKE;
    if (rcl_wait_set_init(&e->wait_set, 1, 1, 0, 0, 0, 0, &e->context, allocator) != RCL_RET_OK) {
        set_error(error, error_size, "wait set");
        goto fail;
    }
    impl->stage = FM_WAIT_SET;
    if (rmw_serialized_message_init(&e->sample, FM_SAMPLE_CAPACITY, &allocator) != RMW_RET_OK) {
        set_error(error, error_size, "sample buffer");
        goto fail;
    }
    impl->stage = FM_SAMPLE;
    return e;
fail:
    close_stages(impl);
    free(impl);
    return NULL;
}

int fm_endpoint_wait_take(fm_endpoint_t *e, int64_t timeout_ns)
{
    rmw_message_info_t info;
    int taken = 0;
    if (rcl_wait_set_clear(&e->wait_set) != RCL_RET_OK
        || rcl_wait_set_add_subscription(&e->wait_set, &e->states, NULL) != RCL_RET_OK
        || rcl_wait_set_add_guard_condition(&e->wait_set, &e->wake, NULL) != RCL_RET_OK) {
        set_error(e->error, sizeof e->error, "wait set");
        return -1;
    }
    rcl_ret_t waited = rcl_wait(&e->wait_set, timeout_ns);
    if (waited != RCL_RET_OK && waited != RCL_RET_TIMEOUT) {
        set_error(e->error, sizeof e->error, "wait");
        return -1;
    }
    while (rcl_take_serialized_message(&e->states, &e->sample, &info, NULL) == RCL_RET_OK)
        taken = 1;                                   /* the newest queued sample */
    rcutils_reset_error();                           /* "take failed": nothing (more) queued */
    return taken;
}

int fm_endpoint_publish(fm_endpoint_t *e, const uint8_t *buffer, size_t length)
{
    rcl_serialized_message_t command = rmw_get_zero_initialized_serialized_message();
    command.buffer = (uint8_t *)buffer;             /* read only by the publish */
    command.buffer_length = command.buffer_capacity = length;
    command.allocator = rcl_get_default_allocator();
    if (rcl_publish_serialized_message(&e->commands, &command, NULL) != RCL_RET_OK) {
        set_error(e->error, sizeof e->error, "publish");
        return -1;
    }
    return 0;
}

void fm_endpoint_wake(fm_endpoint_t *e)
{
    if (rcl_trigger_guard_condition(&e->wake) != RCL_RET_OK)
        rcutils_reset_error();
}

int fm_endpoint_matched(fm_endpoint_t *e, int64_t *state_publishers, int64_t *command_subscribers)
{
    size_t publishers = 0, subscribers = 0;
    if (rcl_subscription_get_publisher_count(&e->states, &publishers) != RCL_RET_OK
        || rcl_publisher_get_subscription_count(&e->commands, &subscribers) != RCL_RET_OK) {
        set_error(e->error, sizeof e->error, "matched count");
        return -1;
    }
    *state_publishers = (int64_t)publishers;
    *command_subscribers = (int64_t)subscribers;
    return 0;
}

void fm_endpoint_close(fm_endpoint_t *e)
{
    if (!e)
        return;
    fm_endpoint_impl_t *impl = (fm_endpoint_impl_t *)e;    /* public_part is the first member */
    close_stages(impl);
    free(impl);
}
