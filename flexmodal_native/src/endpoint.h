/* A joint-state reader and a command writer on an rcl context and node of their own (no rclpy
 * object is touched from C): what the controller's native cycle (control_cycle.c) and the bare
 * benchmark loop (bare_control_cycle.c) share. rcl_init reads ROS_DOMAIN_ID and
 * ROS_AUTOMATIC_DISCOVERY_RANGE from the environment, as rclpy's init does; the node takes no
 * global arguments (topic names arrive fully resolved by the Python node) and has no rosout. */
#ifndef FLEXMODAL_NATIVE_ENDPOINT_H
#define FLEXMODAL_NATIVE_ENDPOINT_H

#include <stdint.h>

#include <rcl/rcl.h>
#include <rmw/serialized_message.h>

typedef struct {
    rcl_context_t context;
    rcl_node_t node;
    rcl_subscription_t states;      /* sensor_msgs/JointState */
    rcl_publisher_t commands;       /* std_msgs/Float64MultiArray */
    rcl_guard_condition_t wake;     /* ends a wait from another thread */
    rcl_wait_set_t wait_set;
    rcl_serialized_message_t sample;
    char error[256];
} fm_endpoint_t;

/* QoS of one side: history depth and reliability (best effort or reliable); keep last, volatile. */
typedef struct {
    int64_t depth;
    int64_t best_effort;
} fm_qos_t;

/* NULL on failure, with the reason in error (error_size bytes). */
fm_endpoint_t *fm_endpoint_open(const char *node_name, const char *node_namespace, const char *states_topic,
                                fm_qos_t states_qos, const char *command_topic, fm_qos_t command_qos,
                                char *error, int64_t error_size);
/* Blocks until a sample is queued, fm_endpoint_wake is called or timeout_ns passed (< 0: forever);
 * then takes the newest queued sample into endpoint->sample. 1: a sample was taken, 0: none,
 * -1: rcl failed (endpoint->error). */
int fm_endpoint_wait_take(fm_endpoint_t *endpoint, int64_t timeout_ns);
/* 0, or -1 with endpoint->error set. */
int fm_endpoint_publish(fm_endpoint_t *endpoint, const uint8_t *buffer, size_t length);
void fm_endpoint_wake(fm_endpoint_t *endpoint);
/* Writers matched by the reader, readers matched by the writer (DDS matching, each side's own
 * view: a sample published before the reader matched its writer is not received). 0, or -1. */
int fm_endpoint_matched(fm_endpoint_t *endpoint, int64_t *state_publishers, int64_t *command_subscribers);
void fm_endpoint_close(fm_endpoint_t *endpoint);

#endif
